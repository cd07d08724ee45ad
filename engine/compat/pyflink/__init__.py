"""The ``pyflink`` package name, served by Millstream: ``pyflink.X`` is ``millstream.engine.X``."""
# Marks this module as Millstream's own: installed from a wheel it lives in site-packages/pyflink,
# outside the engine package, and install() must not take it for apache-flink's and drop it.
__millstream_shim__ = True

from millstream.engine.compat.pyflink_alias import install as _install  # noqa: E402

_install()
