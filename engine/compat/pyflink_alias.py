"""An import hook that maps ``pyflink.<path>`` onto ``engine.<path>``.

The alias returns the very same module objects, so ``isinstance`` checks
between PyFlink-style user code and the engine hold. ``millstream run``, a
TaskManager's slot processes and the other entry points that run user code
install it first on ``sys.meta_path`` so it wins even over an installed
apache-flink. A plain ``python program.py`` reaches it through the fallback
finder that ``millstream-pyflink.pth`` installs (``_millstream_pyflink``), which
asks for ``pyflink`` only when apache-flink's is not importable; the name then
resolves to the shim package, which installs the alias on first import.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from types import ModuleType

SHIM = "millstream.engine.compat.pyflink"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the target module is already executed


class PyFlinkAliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname == "pyflink":
            real = SHIM
        elif fullname.startswith("pyflink."):
            real = "millstream.engine." + fullname[len("pyflink.") :]
        else:
            return None
        try:
            found = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            found = None
        if found is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(real), is_package=found.submodule_search_locations is not None
        )


def install() -> None:
    """Put the alias first on the import path (idempotent)."""
    if not any(isinstance(f, PyFlinkAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, PyFlinkAliasFinder())
    # A real pyflink imported earlier would shadow ours; drop it so the alias applies.
    engine_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in [m for m in sys.modules if m == "pyflink" or m.startswith("pyflink.")]:
        module = sys.modules[name]
        if getattr(module, "__millstream_shim__", False):
            continue  # our own shim, wherever the distribution put it
        origin = getattr(module, "__file__", None) or ""
        if not os.path.abspath(origin).startswith(engine_dir):
            del sys.modules[name]
