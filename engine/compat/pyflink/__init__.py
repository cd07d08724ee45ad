"""The ``pyflink`` package name, served by Millstream: ``pyflink.X`` is ``millstream.engine.X``."""
# Marks this module as Millstream's own, whatever name it was imported by: install() must not take
# it for apache-flink's and drop it, and the .pth fallback finder serves ``pyflink.*`` only under it.
__millstream_shim__ = True

from millstream.engine.compat.pyflink_alias import install as _install  # noqa: E402

_install()
