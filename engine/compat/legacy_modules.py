"""Old module names kept importable after the packages moved under ``millstream``.

Millstream's packages were once installed at the top level (``engine``, ``backend``,
``migrations``) and now live under ``millstream.``. Checkpoints, savepoints and stored job graphs
written by an older version name classes by the old module path (pickle records
``engine.windowing.windows.TimeWindow``, not a copy of the class), so loading them needs
``import engine.windowing.windows`` to work. This finder answers such an import with the very
module object of the new name (``isinstance`` holds, nothing is loaded twice); it stands aside
when a different package of that name is installed, which then keeps its name.

Before the move (when this module is itself ``engine.compat.legacy_modules``) it does nothing.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

#: the package this module's top-level package sits in ("millstream."), or "" before the move
PREFIX = __name__[: -len("engine.compat.legacy_modules")]
OLD_NAMES = ("engine", "backend", "migrations")


def _new_name(fullname: str) -> str | None:
    top = fullname.partition(".")[0]
    if not PREFIX or top not in OLD_NAMES:
        return None
    return PREFIX + fullname


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: Any = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has set __spec__ to the alias's; the module keeps its own name.
        module.__spec__ = self.spec


class LegacyModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = _new_name(fullname)
        if new is None:
            return None
        top = fullname.partition(".")[0]
        if top == fullname and not self._ours(top):
            return None
        if top != fullname and sys.modules.get(top) is not sys.modules.get(PREFIX + top):
            return None  # the top-level name is another package's
        try:
            found = importlib.util.find_spec(new)
        except ModuleNotFoundError:
            found = None
        if found is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new), is_package=found.submodule_search_locations is not None)

    @staticmethod
    def _ours(top: str) -> bool:
        """No other package of that name on the path, or only our own directory (a source tree
        whose root is on sys.path, where ``engine/`` is both the old and the new package)."""
        other = importlib.machinery.PathFinder.find_spec(top)
        if other is None or not other.submodule_search_locations:
            return other is None
        new = importlib.util.find_spec(PREFIX + top)
        ours = {os.path.realpath(p) for p in (new.submodule_search_locations or [])} if new else set()
        return {os.path.realpath(p) for p in other.submodule_search_locations} <= ours


def install() -> None:
    """Put the finder first on the import path (idempotent); a no-op before the move."""
    if PREFIX and not any(isinstance(f, LegacyModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, LegacyModuleFinder())
