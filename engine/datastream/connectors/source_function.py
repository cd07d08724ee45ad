"""Adapts a push-style ``SourceFunction`` (``run(ctx)``/``cancel()``) to the pull protocol.

``run`` executes on its own thread and hands records over a bounded queue,
so a slow pipeline blocks the user's loop instead of growing memory. A
SourceFunction that is also a ``CheckpointedFunction`` keeps its position in
operator list state; as in Flink, it updates that state and emits records
under ``ctx.get_checkpoint_lock()``, and a checkpoint holds the lock while it
drains the queue (those records go out before the barrier) and snapshots the
function, so state and output agree. A SourceFunction has no splits: its
reader position is always the empty list.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Mapping

from millstream.engine.compat.unsupported import java_only
from millstream.engine.datastream.connectors.source import Source, SourceReader

_END = object()


class SourceFunction:
    """PyFlink-style push source. Call ``ctx.collect(value)`` from ``run``."""

    get_java_function = java_only("the SourceFunction itself, env.add_source(source_function)")

    def run(self, ctx: Any) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        pass


class _Ctx:
    def __init__(self, reader: "_SourceFunctionReader") -> None:
        self._reader = reader

    def collect(self, value: Any) -> None:
        self._reader.put(value)

    def collect_with_timestamp(self, value: Any, timestamp: int) -> None:
        self._reader.put(value)

    def get_checkpoint_lock(self) -> Any:
        """Hold it while emitting and updating the state a checkpoint snapshots."""
        return self._reader.lock


class _SourceFunctionReader(SourceReader):
    def __init__(self, fn: SourceFunction, operator_name: str) -> None:
        from millstream.engine.runtime.state.operator_state import FunctionStateHandler

        self.fn = fn
        self.q: "queue.Queue[Any]" = queue.Queue(maxsize=4096)
        self.lock = threading.RLock()
        self.error: BaseException | None = None
        self.done = False
        self.ending = False  # the END marker was taken out of the queue by a checkpoint
        self.closed = False
        self.state = FunctionStateHandler(fn, operator_name)
        self.thread: threading.Thread | None = None

    def initialize_function_state(self, restored: Mapping[str, Any] | None, checkpoint_id: int | None) -> None:
        """Before the first record: the CheckpointedFunction's operator state (None: a fresh start)."""
        self.state.initialize(restored, checkpoint_id)

    def _start(self) -> None:
        if self.state.checkpointed and self.state.store is None:
            self.state.initialize(None, None)
        self.thread = threading.Thread(target=self._run, name="source-function", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.fn.run(_Ctx(self))
        except BaseException as e:  # surfaced on the task thread by poll_batch
            self.error = e
        finally:
            self.q.put(_END)

    def put(self, value: Any) -> None:
        while True:
            with self.lock:
                try:
                    self.q.put_nowait(value)
                    return
                except queue.Full:
                    pass
            if self.closed:
                raise RuntimeError("the source was cancelled")
            time.sleep(0.001)  # outside the lock (unless the user holds it): a checkpoint may take it

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if self.thread is None:
            self._start()
        if self.done:
            return None
        if self.ending:
            return self._end([])
        out: list[Any] = []
        try:
            item = self.q.get(timeout=0.05)
        except queue.Empty:
            return out
        while True:
            if item is _END:
                return self._end(out)
            out.append(item)
            if len(out) >= max_records:
                return out
            try:
                item = self.q.get_nowait()
            except queue.Empty:
                return out

    def _end(self, out: list[Any]) -> list[Any] | None:
        if self.error is not None:
            raise self.error
        self.done = True
        return out or None

    # -- checkpoints: called by the task, on its thread ------------------------
    def prepare_snapshot(self) -> list[Any]:
        """Take the checkpoint lock; returns the records queued so far, to emit before the barrier.
        Keeps draining while it waits, so a user blocked on a full queue under the lock gets through."""
        drained: list[Any] = []
        while not self.lock.acquire(timeout=0.002):
            self._drain_into(drained)
        self._drain_into(drained)
        return drained

    def _drain_into(self, out: list[Any]) -> None:
        while not self.ending:
            try:
                item = self.q.get_nowait()
            except queue.Empty:
                return
            if item is _END:
                self.ending = True
            else:
                out.append(item)

    def snapshot_function_state(self, checkpoint_id: int, timestamp: int) -> Any:
        return self.state.snapshot(checkpoint_id, timestamp)

    def finish_snapshot(self) -> None:
        self.lock.release()

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.state.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.state.notify_checkpoint_aborted(checkpoint_id)

    def close(self) -> None:
        self.closed = True
        self.fn.cancel()


class SourceFunctionSource(Source):
    parallel = False

    def __init__(self, fn: SourceFunction, bounded: bool = False) -> None:
        self.fn = fn
        self.bounded = bounded

    def is_bounded(self) -> bool:
        return self.bounded

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        return _SourceFunctionReader(self.fn, self.name())

    def name(self) -> str:
        return "Custom Source"
