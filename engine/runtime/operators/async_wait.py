"""AsyncWaitOperator: runs an AsyncFunction's coroutines with up to ``capacity`` calls in flight.

Each operator instance owns an asyncio event loop on a thread of its own. The task thread puts a
record in the stream element queue (``async_queue``) and starts its call on the loop; the loop
thread only hands finished calls back through a locked mailbox. Everything else - the user's
``timeout``, result checks, emitting, failing the task - happens on the task thread, which
collects the mailbox between input batches (``process_mail``, called by the StreamTask loop), and
blocks on it (a condition, no spinning) when the queue is full (backpressure: the task takes no
more input) or at the end of input.

Checkpoints: completed results that may leave are emitted before the barrier; the records still
queued (in flight, or completed but waiting for earlier ones) go into operator list state with
the watermarks between them, and a restored operator calls them again, so each record's results
are emitted exactly once downstream of an exactly-once sink.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Any

from millstream.engine.runtime.io.channel import TaskCancelled
from millstream.engine.runtime.operators.async_queue import (
    RecordEntry,
    WatermarkEntry,
    check_results,
    create_queue,
    retry_backoff_ms,
)
from millstream.engine.runtime.operators.base import StreamOperator

# How long the task loop may block on its input while calls are in flight before it looks at the
# mailbox again: the loop thread cannot wake a task blocked on a Redis read, so results wait at
# most this long when no input arrives (the same bound as the default buffer timeout).
MAIL_POLL_S = 0.01
_WAIT_SLICE_S = 0.1  # blocked waits check for cancellation this often

_RESULT, _ERROR, _TIMEOUT = "result", "error", "timeout"
RECORD_TAG, WATERMARK_TAG = "r", "w"  # the kinds of entries in the operator state


class AsyncFunctionError(RuntimeError):
    """An AsyncFunction call failed (after any retries): fails the task, naming function and input."""


class AsyncWaitOperator(StreamOperator):
    def __init__(self, function: Any, ctx: Any, params: dict[str, Any]) -> None:
        super().__init__(function, ctx, params)
        self.timeout_ms = int(params.get("timeout_ms", 0))
        self.strategy = params["retry_strategy"]
        self.queue = create_queue(bool(params.get("ordered", True)), int(params.get("capacity", 100)))
        self.function_name = type(function).__qualname__
        self.cancelled: threading.Event | None = None  # set by the StreamTask: blocked waits end with it
        self._mail: deque[tuple[RecordEntry, str, Any]] = deque()
        self._mail_ready = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._calls: set[asyncio.Task] = set()  # strong references: the loop keeps only weak ones
        self._retrying = self.strategy.get_retry_predicate() is not None and any(
            p is not None
            for p in (self.strategy.get_retry_predicate().result_predicate(),
                      self.strategy.get_retry_predicate().exception_predicate())
        )

    # -- lifecycle --------------------------------------------------------------------
    def open(self) -> None:
        super().open()
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=f"async-io {self.ctx.task_name}", daemon=True)
        self._thread.start()
        started.wait()

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and thread is not None:
            async def shutdown() -> None:
                # Calls in flight are abandoned (a restored attempt calls their records again);
                # they get a moment to unwind from the cancellation before the loop stops.
                calls = list(self._calls)
                for call in calls:
                    call.cancel()
                if calls:
                    await asyncio.wait(calls, timeout=1.0)
                loop.stop()

            try:
                asyncio.run_coroutine_threadsafe(shutdown(), loop)
            except RuntimeError:
                pass  # the loop already closed
            thread.join(timeout=2.0)
        super().close()

    # -- input ------------------------------------------------------------------------
    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.process_mail()
        queue = self.queue
        starting: list[RecordEntry] = []
        for i, value in enumerate(values):
            if queue.is_full():
                self._start(starting)
                starting = []
                while queue.is_full():  # backpressure: no more input until a call completes
                    self._wait_for_mail()
                    self.process_mail()
            starting.append(queue.put_record(value, None if timestamps is None else timestamps[i]))
        self._start(starting)

    def process_watermark(self, watermark: int) -> None:
        self.process_mail()
        while self.queue.is_full():
            self._wait_for_mail()
            self.process_mail()
        self.queue.put_watermark(watermark)
        self._emit(self.queue.pop_completed())

    def end_input(self) -> None:
        """Every call in flight completes and is emitted before the operators after this one end."""
        self.process_mail()
        while len(self.queue):
            self._wait_for_mail()
            self.process_mail()

    def stop_without_drain(self) -> None:
        # Stop-with-savepoint without drain: the queued records are in the savepoint and will be
        # called again when the job resumes from it, so their results must not be emitted now.
        pass

    # -- checkpoints ------------------------------------------------------------------
    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        self.process_mail()  # results that may leave now go before the barrier, not into state

    def snapshot_state(self) -> Any:
        # Operator list state: on a rescale the records are dealt out to the new subtasks.
        out: list[tuple[Any, ...]] = []
        for entry in self.queue.values():
            if isinstance(entry, WatermarkEntry):
                out.append((WATERMARK_TAG, entry.watermark))
            else:
                out.append((RECORD_TAG, entry.value, entry.timestamp))
        return out

    def restore_state(self, state: Any) -> None:
        if not state:
            return
        # Re-added beyond the capacity if need be (a rescale may give this subtask more):
        # nothing may be emitted yet, before the operators after this one restored their state.
        starting: list[RecordEntry] = []
        for item in state:
            if item[0] == WATERMARK_TAG:
                self.queue.put_watermark(item[1])
            else:
                starting.append(self.queue.put_record(item[1], item[2]))
        self._start(starting)

    # -- the mailbox --------------------------------------------------------------------
    def process_mail(self) -> float:
        """On the task thread: take finished calls, emit what may leave. Returns how soon the task
        loop should call again (``inf`` when nothing is in flight)."""
        mail = self._mail
        if mail:
            with self._mail_ready:
                finished = list(mail)
                mail.clear()
            for entry, kind, payload in finished:
                self.queue.complete(entry, self._results_of(entry, kind, payload))
            self._emit(self.queue.pop_completed())
        return MAIL_POLL_S if len(self.queue) else float("inf")

    def _results_of(self, entry: RecordEntry, kind: str, payload: Any) -> list[Any]:
        if kind == _TIMEOUT:
            # The user's fallback, or by default a TimeoutError that fails the task (as in Flink).
            return check_results(self.function.timeout(entry.value), self.function_name)
        if kind == _ERROR:
            raise AsyncFunctionError(
                f"AsyncFunction {self.function_name} failed on input {entry.value!r}: "
                f"{type(payload).__name__}: {payload}"
            ) from payload
        return check_results(payload, self.function_name)

    def _wait_for_mail(self) -> None:
        """Block the task thread until a call finishes (or the task is cancelled)."""
        cancelled = self.cancelled
        with self._mail_ready:
            while not self._mail:
                if cancelled is not None and cancelled.is_set():
                    raise TaskCancelled()
                if self._thread is None or not self._thread.is_alive():
                    raise RuntimeError(f"the event loop of '{self.ctx.operator_name}' is not running")
                self._mail_ready.wait(_WAIT_SLICE_S)

    def _post(self, entry: RecordEntry, kind: str, payload: Any) -> None:
        """On the loop thread: hand a finished call to the task thread."""
        with self._mail_ready:
            self._mail.append((entry, kind, payload))
            self._mail_ready.notify()

    def _emit(self, entries: list[Any]) -> None:
        """Emit records (batched while their timestamps are alike) and watermarks, in order."""
        values: list[Any] = []
        stamps: list[int] = []
        stamped = False
        out = self.output

        def flush() -> None:
            if values:
                out.emit(list(values), list(stamps) if stamped else None)
                values.clear()
                stamps.clear()

        for entry in entries:
            if isinstance(entry, WatermarkEntry):
                flush()
                out.emit_watermark(entry.watermark)
                continue
            if not entry.results:
                continue
            has_ts = entry.timestamp is not None
            if values and has_ts != stamped:
                flush()
            stamped = has_ts
            values.extend(entry.results)
            if has_ts:
                stamps.extend([entry.timestamp] * len(entry.results))
        flush()

    # -- the loop thread ----------------------------------------------------------------
    def _start(self, entries: list[RecordEntry]) -> None:
        if not entries:
            return
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"'{self.ctx.operator_name}' is not open")
        loop.call_soon_threadsafe(self._spawn, entries)

    def _spawn(self, entries: list[RecordEntry]) -> None:
        loop = self._loop
        if loop is None:
            return
        for entry in entries:
            call = loop.create_task(self._call(entry))
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)

    async def _call(self, entry: RecordEntry) -> None:
        try:
            if self.timeout_ms > 0:
                kind, payload = await asyncio.wait_for(self._attempts(entry), self.timeout_ms / 1000)
            else:
                kind, payload = await self._attempts(entry)
        except asyncio.TimeoutError:
            # Only wait_for's own timeout gets here: _attempts catches whatever the function raises.
            kind, payload = _TIMEOUT, None
        except asyncio.CancelledError:
            return  # the operator is closing
        self._post(entry, kind, payload)

    async def _attempts(self, entry: RecordEntry) -> tuple[str, Any]:
        """Call the function, and again as long as the retry strategy asks for it."""
        started = time.monotonic()
        attempt = 1
        while True:
            result: Any = None
            error: BaseException | None = None
            try:
                result = await self.function.async_invoke(entry.value)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the user's failure, reported on the task thread
                error = e
            if not self._retrying:
                break
            try:
                backoff = retry_backoff_ms(
                    self.strategy, attempt, result, error, (time.monotonic() - started) * 1000, self.timeout_ms
                )
            except Exception as e:  # noqa: BLE001 - a failing predicate fails the record like its call
                result, error = None, e
                break
            if backoff is None:
                break
            await asyncio.sleep(backoff / 1000)
            attempt += 1
        return (_ERROR, error) if error is not None else (_RESULT, result)

