"""``pyflink.datastream.formats``: serialization formats for connectors (see the submodules)."""
