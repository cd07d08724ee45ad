"""Adapts a push-style ``SourceFunction`` (``run(ctx)``/``cancel()``) to the pull protocol.

``run`` executes on its own thread and hands records over a bounded queue,
so a slow pipeline blocks the user's loop instead of growing memory.
"""
from __future__ import annotations

import queue
import threading
from typing import Any

from engine.datastream.connectors.source import Source, SourceReader

_END = object()


class SourceFunction:
    """PyFlink-style push source. Call ``ctx.collect(value)`` from ``run``."""

    def run(self, ctx: Any) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        pass


class _Ctx:
    def __init__(self, q: "queue.Queue[Any]") -> None:
        self._q = q

    def collect(self, value: Any) -> None:
        self._q.put(value)

    def collect_with_timestamp(self, value: Any, timestamp: int) -> None:
        self._q.put(value)


class _SourceFunctionReader(SourceReader):
    def __init__(self, fn: SourceFunction) -> None:
        self.fn = fn
        self.q: "queue.Queue[Any]" = queue.Queue(maxsize=4096)
        self.error: BaseException | None = None
        self.done = False
        self.thread = threading.Thread(target=self._run, name="source-function", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.fn.run(_Ctx(self.q))
        except BaseException as e:  # surfaced on the task thread by poll_batch
            self.error = e
        finally:
            self.q.put(_END)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if self.done:
            return None
        out: list[Any] = []
        try:
            item = self.q.get(timeout=0.05)
        except queue.Empty:
            return out
        while True:
            if item is _END:
                if self.error is not None:
                    raise self.error
                self.done = True
                return out or None
            out.append(item)
            if len(out) >= max_records:
                return out
            try:
                item = self.q.get_nowait()
            except queue.Empty:
                return out

    def close(self) -> None:
        self.fn.cancel()


class SourceFunctionSource(Source):
    parallel = False

    def __init__(self, fn: SourceFunction, bounded: bool = False) -> None:
        self.fn = fn
        self.bounded = bounded

    def is_bounded(self) -> bool:
        return self.bounded

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        return _SourceFunctionReader(self.fn)

    def name(self) -> str:
        return "Custom Source"
