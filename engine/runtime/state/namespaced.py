"""Keyed state scoped to a namespace as well as the key (Flink's namespaced InternalKvState): the
per-window state of a ProcessWindowFunction (``context.window_state()``).

Each state is a backend table keyed by the **key** alone, holding ``{namespace: value}``, so it is
snapshotted and rescaled with the key's key group like any keyed state. The heap state classes work
on it unchanged through ``_ScopedTable``, which resolves the current key's namespace map on access.
"""
from __future__ import annotations

from typing import Any, Callable

from millstream.engine.runtime.state.heap_backend import StateFactory, StateTypeMismatch

_NONE = object()


class _ScopedTable:
    """The mapping namespace -> value of the backend's current key, inside a key -> {namespace: value} table."""

    def __init__(self, root: Any, backend: Any) -> None:
        self.root = root
        self.backend = backend

    def _map(self, create: bool) -> dict | None:
        key = self.backend.current_key
        m = self.root.get(key)
        if m is None and create:
            m = self.root[key] = {}
        return m

    def get(self, ns: Any, default: Any = None) -> Any:
        m = self._map(False)
        return default if m is None else m.get(ns, default)

    def __getitem__(self, ns: Any) -> Any:
        m = self._map(False)
        if m is None:
            raise KeyError(ns)
        return m[ns]

    def __contains__(self, ns: Any) -> bool:
        m = self._map(False)
        return m is not None and ns in m

    def __setitem__(self, ns: Any, value: Any) -> None:
        self._map(True)[ns] = value  # type: ignore[index]

    def setdefault(self, ns: Any, default: Any = None) -> Any:
        return self._map(True).setdefault(ns, default)  # type: ignore[union-attr]

    def pop(self, ns: Any, default: Any = _NONE) -> Any:
        m = self._map(False)
        if m is None or ns not in m:
            if default is _NONE:
                raise KeyError(ns)
            return default
        value = m.pop(ns)
        if not m:
            del self.root[self.backend.current_key]
        return value

    def __delitem__(self, ns: Any) -> None:
        self.pop(ns)


class NamespacedStateStore(StateFactory):
    """A KeyedStateStore (``get_state``, ``get_list_state``...) for the current key and ``namespace()``."""

    def __init__(self, backend: Any, prefix: str, namespace: Callable[[], Any], operator_name: str) -> None:
        self.backend = backend
        self.prefix = prefix
        self.namespace = namespace
        self.operator_name = operator_name

    # the heap state classes read these two from their "backend"
    @property
    def current_key(self) -> Any:
        return self.namespace()

    @property
    def clock(self) -> Callable[[], int]:
        return self.backend.clock

    def table(self, name: str, kind: str) -> _ScopedTable:  # type: ignore[override]
        full = self.prefix + name
        try:
            root = self.backend.table(full, "namespaced-" + kind)
        except StateTypeMismatch as e:
            raise StateTypeMismatch(f"in '{self.operator_name}': per-window {e}") from None
        return _ScopedTable(root, self.backend)

    def clear_namespace(self, key: Any, namespace: Any) -> None:
        """Drop every state of (key, namespace): the window is gone."""
        # Every table under the prefix, including ones restored but not touched since.
        for full, kind in list(self.backend.kinds.items()):
            if not full.startswith(self.prefix):
                continue
            root = self.backend.table(full, kind)
            m = root.get(key)
            if m is not None and namespace in m:
                del m[namespace]
                if not m:
                    del root[key]
                else:
                    root[key] = m  # an on-disk backend learns of the change
