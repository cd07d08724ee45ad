"""Window assigners written against PyFlink's API, run on Millstream's window operators.

PyFlink's assigner protocol is ``assign_windows(element, timestamp, context)``,
``is_event_time()`` and ``get_default_trigger(env)`` methods, and for merging
assigners ``merge_windows(windows, callback)``. Millstream's operators (native
and Spark) speak the two-argument form with ``is_event_time``/``is_merging``
attributes; ``adapt_assigner`` wraps a PyFlink-style assigner once, when the
program calls ``window(...)``, so nothing downstream needs to know.
"""
from __future__ import annotations

import inspect
import time
from typing import Any

from millstream.engine.compat.unsupported import not_supported
from millstream.engine.windowing.assigners import MergingWindowAssigner, WindowAssigner
from millstream.engine.windowing.triggers import Trigger


def is_pyflink_style(assigner: Any) -> bool:
    """True for an assigner whose ``is_event_time`` is a method or whose ``assign_windows`` takes a context."""
    if callable(getattr(type(assigner), "is_event_time", None)):
        return True
    try:
        params = [
            p for p in inspect.signature(assigner.assign_windows).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return False
    return len(params) >= 3


class _AssignerContext(WindowAssigner.WindowAssignerContext):
    def get_current_processing_time(self) -> int:
        return int(time.time() * 1000)

    def get_runtime_context(self) -> Any:
        raise not_supported(
            "WindowAssignerContext.get_runtime_context",
            "a window assigner runs without a runtime context in Millstream",
            "a trigger's get_partitioned_state or a ProcessWindowFunction's window_state for per-window state",
        )


class _Merges(MergingWindowAssigner.MergeCallback):
    def __init__(self) -> None:
        self.groups: list[tuple[Any, list[Any]]] = []

    def merge(self, to_be_merged: Any, merge_result: Any) -> None:
        self.groups.append((merge_result, list(to_be_merged)))


class UserWindowAssigner(WindowAssigner):
    """A PyFlink-style assigner in Millstream's protocol (see the module docstring)."""

    def __init__(self, user: Any) -> None:
        self.user = user
        flag = getattr(user, "is_event_time")
        self.is_event_time = bool(flag() if callable(flag) else flag)
        self.is_merging = isinstance(user, MergingWindowAssigner)

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        return list(self.user.assign_windows(element, timestamp, _AssignerContext()))

    def get_default_trigger(self) -> Trigger:
        method = self.user.get_default_trigger
        try:
            takes_env = len(inspect.signature(method).parameters) >= 1
        except (TypeError, ValueError):
            takes_env = True
        # PyFlink passes the environment; no default trigger uses it.
        return method(None) if takes_env else method()

    def merge_windows(self, windows: list[Any]) -> list[tuple[Any, list[Any]]]:
        callback = _Merges()
        self.user.merge_windows(list(windows), callback)
        merged = {w for _, members in callback.groups for w in members}
        return callback.groups + [(w, [w]) for w in windows if w not in merged]

    def get_window_serializer(self) -> Any:
        return self.user.get_window_serializer()

    def __repr__(self) -> str:
        return repr(self.user)


def adapt_assigner(assigner: WindowAssigner) -> WindowAssigner:
    return UserWindowAssigner(assigner) if is_pyflink_style(assigner) else assigner
