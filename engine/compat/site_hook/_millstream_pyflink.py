"""The ``pyflink`` name for plain ``python program.py``, unless Apache Flink's own is installed.

Installed as a top-level module next to ``millstream-pyflink.pth``, whose one line runs
``install()`` at every interpreter start. Millstream installs no ``pyflink/`` directory, so it
never overwrites (or, uninstalled, deletes) apache-flink's files: instead this finder sits *last* on
``sys.meta_path`` and answers ``import pyflink`` only when no finder before it (the path, an
editable install's finder) found a package of that name. With apache-flink installed, plain
imports get Apache Flink's pyflink; ``millstream run``, the slot processes and the other entry
points put Millstream's alias first on purpose (``millstream.engine.compat.pyflink_alias``).

Kept import-light because it runs in every interpreter, pip included: only ``sys`` at start, and
Millstream itself is imported when a program asks for ``pyflink``, not before.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself is not imported here: it is not loaded at start
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

_NAME = "pyflink"


class PyFlinkFallbackFinder:
    """Serves ``pyflink`` from Millstream when nothing else on the import path provides it."""

    @classmethod
    def find_spec(cls, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname != _NAME and not fullname.startswith(_NAME + "."):
            return None
        if fullname != _NAME:
            # A submodule reaches this finder only if the path did not have it: serve it only under
            # Millstream's own pyflink, never as a missing piece of another package's.
            if not getattr(sys.modules.get(_NAME), "__millstream_shim__", False):
                return None
        try:
            # The alias answers ``pyflink`` with Millstream's shim package, whose import puts the
            # alias first on the path: later ``pyflink.*`` imports go straight there.
            from millstream.engine.compat.pyflink_alias import PyFlinkAliasFinder
        except ImportError:
            return None  # Millstream itself is broken or gone: say "No module named pyflink"
        return PyFlinkAliasFinder().find_spec(fullname, path, target)


def install() -> None:
    """Append the finder to ``sys.meta_path`` once (the ``.pth`` line calls this)."""
    if PyFlinkFallbackFinder not in sys.meta_path:
        sys.meta_path.append(PyFlinkFallbackFinder)
