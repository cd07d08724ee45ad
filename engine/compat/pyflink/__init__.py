"""The ``pyflink`` package name, served by Millstream: ``pyflink.X`` is ``engine.X``."""
from engine.compat.pyflink_alias import install as _install

_install()
