"""WriteBehindJobStore: the JobStore the Dispatcher uses, which keeps writes in memory while the SQL
database is unreachable and writes them, in order, once it is back.

Running jobs never wait for SQL: a state change, an exception, a checkpoint's statistics or a savepoint
record that cannot be written is queued (``StoreUnavailable`` from the store underneath), and every
later write queues behind it so none overtakes an older one. Queued writes of the same row are merged
where they land (the newest job record, checkpoint or savepoint wins), so the queue grows with the
number of rows touched, not with the number of writes. Exceptions are the only rows that pile up; past
``max_exceptions`` the oldest queued ones are dropped and counted. Reads write the queue first, so they
see every write made; while the database is away they raise ``StoreUnavailable`` (REST answers 503).

A leader's queued writes are checked against its fence when they land: a JobManager that lost the
lease meanwhile gets ``FencedOut`` from ``flush`` and steps down, its queue discarded with it.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Collection, Mapping

from millstream.engine.jobmanager.job_store import (
    ExceptionRecord, JobOutputRecord, JobRecord, JobStore, SavepointRecord, StoreUnavailable,
)
from millstream.engine.jobmanager.leader_election import FencedOut

log = logging.getLogger("millstream.jobstore")

RETRY_INTERVAL_S = 1.0  # while the database is away, how often the queue is tried


class WriteBehindJobStore:
    def __init__(self, inner: JobStore, max_exceptions: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self.max_exceptions = max_exceptions
        self.clock = clock
        self._lock = threading.RLock()
        # (kind, merge key or None, payload); a merge key finds the queued write of the same row
        self._queue: list[list[Any]] = []
        self._index: dict[tuple[Any, ...], int] = {}
        self._exceptions = 0
        self.dropped_exceptions = 0
        self.unavailable_since: float | None = None  # clock() when the database was first found away
        self.last_error: str | None = None
        self._next_try = 0.0

    # -- state ---------------------------------------------------------------
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def flush(self, force: bool = False) -> bool:
        """Write the queue, oldest first; True when it is empty. Between failures it is tried at most
        every RETRY_INTERVAL_S unless ``force``. FencedOut propagates; a write the database refuses
        for another reason (it would have failed without the queue too) is logged and dropped, so
        one bad row cannot hold back the rest for ever."""
        with self._lock:
            if not self._queue:
                return True
            if not force and self.clock() < self._next_try:
                return False
            done = 0
            try:
                for kind, _, payload in self._queue:
                    try:
                        self._apply(kind, payload)
                    except (StoreUnavailable, FencedOut):
                        raise
                    except Exception:
                        log.exception("a queued %s write was refused by the database and is dropped", kind)
                    done += 1
            except StoreUnavailable as e:
                self._note_down(e)
                return False
            finally:
                self._drop_written(done)
            log.warning(
                "the SQL database is back after %.1f s: %d queued write(s) stored%s",
                self.clock() - (self.unavailable_since or self.clock()), done,
                f"; {self.dropped_exceptions} exception record(s) had been dropped" if self.dropped_exceptions else "",
            )
            self.unavailable_since, self.last_error, self.dropped_exceptions = None, None, 0
            return True

    def _drop_written(self, done: int) -> None:
        if done == 0:
            return
        self._exceptions -= sum(1 for kind, _, _ in self._queue[:done] if kind == "exception")
        del self._queue[:done]
        self._index = {key: i for i, (_, key, _) in enumerate(self._queue) if key is not None}

    def _note_down(self, e: StoreUnavailable) -> None:
        self._next_try = self.clock() + RETRY_INTERVAL_S
        self.last_error = str(e)
        if self.unavailable_since is None:
            self.unavailable_since = self.clock()
            log.warning("%s: keeping job history writes in memory until it is back", e)

    def _apply(self, kind: str, payload: Any) -> None:
        if kind == "job":
            self.inner.save_job(payload)
        elif kind == "exception":
            self.inner.add_exception(payload)
        elif kind == "checkpoints":
            jid, by_id = payload
            self.inner.save_checkpoints(jid, [r for _, r in sorted(by_id.items())])
        elif kind == "restore":
            self.inner.add_checkpoint_restore(*payload)
        elif kind == "savepoint":
            self.inner.save_savepoint(payload)
        elif kind == "output":
            self.inner.save_output(payload)
        elif kind == "collect":
            self.inner.save_collect_marks(*payload)
        elif kind == "stdout":
            jid, ops = payload
            for op in ops:  # saves and resets of one job's marks, in the order they were made
                if op[0] == "save":
                    self.inner.save_stdout_marks(jid, op[1], op[2])
                else:
                    self.inner.reset_stdout_marks(jid, op[1])
        else:  # pragma: no cover - every kind queued is listed above
            raise ValueError(kind)

    # -- writes --------------------------------------------------------------
    def _write(self, kind: str, key: tuple[Any, ...] | None, payload: Any) -> None:
        """Write now if nothing is queued, else (or if the database is away) queue behind the rest."""
        with self._lock:
            if not self._queue or self.flush():
                try:
                    self._apply(kind, payload)
                    return
                except StoreUnavailable as e:
                    self._note_down(e)
            self._enqueue(kind, key, payload)

    def _enqueue(self, kind: str, key: tuple[Any, ...] | None, payload: Any) -> None:
        at = self._index.get(key) if key is not None else None
        if at is not None:
            self._queue[at][2] = self._merge(kind, self._queue[at][2], payload)
            return
        if kind == "exception":
            if self._exceptions >= self.max_exceptions:
                oldest = next(i for i, (k, _, _) in enumerate(self._queue) if k == "exception")
                del self._queue[oldest]
                self._index = {key: i for i, (_, key, _) in enumerate(self._queue) if key is not None}
                self._exceptions -= 1
                self.dropped_exceptions += 1
            self._exceptions += 1
        if key is not None:
            self._index[key] = len(self._queue)
        self._queue.append([kind, key, payload])

    @staticmethod
    def _merge(kind: str, old: Any, new: Any) -> Any:
        if kind == "job" and new.user_code is None and old.user_code is not None:
            return replace(new, user_code=old.user_code)  # the code travels with the first record only
        if kind == "checkpoints":
            return (new[0], {**old[1], **new[1]})
        if kind == "collect":  # a writer's highest index only grows
            merged = dict(old[1])
            for writer, index in new[1].items():
                merged[writer] = max(index, merged.get(writer, -1))
            return (new[0], merged)
        if kind == "stdout":  # one slot per job keeps its saves and resets in order
            return (new[0], old[1] + new[1])
        return new

    def save_job(self, record: JobRecord) -> None:
        self._write("job", ("job", record.jid), record)

    def add_exception(self, record: ExceptionRecord) -> None:
        self._write("exception", None, record)

    def save_checkpoints(self, jid: str, records: list[dict[str, Any]]) -> None:
        self._write("checkpoints", ("checkpoints", jid), (jid, {r["id"]: r for r in records}))

    def add_checkpoint_restore(self, jid: str, record: dict[str, Any]) -> None:
        self._write("restore", None, (jid, record))

    def save_savepoint(self, record: SavepointRecord) -> None:
        self._write("savepoint", ("savepoint", record.jid, record.request_id), replace(record))

    def save_output(self, record: JobOutputRecord) -> None:
        self._write("output", ("output", record.jid), record)

    def save_collect_marks(self, jid: str, highs: Mapping[bytes, int]) -> None:
        self._write("collect", ("collect", jid), (jid, dict(highs)))

    def save_stdout_marks(self, jid: str, marks: Mapping[bytes, tuple[int, int]], upto: int) -> None:
        self._write("stdout", ("stdout", jid), (jid, [("save", dict(marks), upto)]))

    def reset_stdout_marks(self, jid: str, upto: int) -> None:
        self._write("stdout", ("stdout", jid), (jid, [("reset", upto)]))

    # -- reads: every write made is in SQL first --------------------------------
    def _read(self) -> None:
        with self._lock:
            if self._queue and not self.flush(force=True):
                raise StoreUnavailable(self.last_error or "the SQL database is unavailable")

    def get_job(self, jid: str) -> JobRecord | None:
        self._read()
        return self.inner.get_job(jid)

    def list_jobs(self, unfinished_only: bool = False) -> list[JobRecord]:
        self._read()
        return self.inner.list_jobs(unfinished_only)

    def count_jobs(self, excluding: Collection[str] = ()) -> dict[str, int]:
        self._read()
        return self.inner.count_jobs(excluding)

    def list_exceptions(self, jid: str, limit: int = 100) -> list[ExceptionRecord]:
        self._read()
        return self.inner.list_exceptions(jid, limit)

    def list_checkpoints(self, jid: str) -> list[dict[str, Any]]:
        self._read()
        return self.inner.list_checkpoints(jid)

    def list_checkpoint_restores(self, jid: str) -> list[dict[str, Any]]:
        self._read()
        return self.inner.list_checkpoint_restores(jid)

    def get_savepoint(self, jid: str, request_id: str) -> SavepointRecord | None:
        self._read()
        return self.inner.get_savepoint(jid, request_id)

    def list_savepoints(self, jid: str) -> list[SavepointRecord]:
        self._read()
        return self.inner.list_savepoints(jid)

    def get_output(self, jid: str) -> JobOutputRecord | None:
        self._read()
        return self.inner.get_output(jid)

    def get_collect_mark(self, jid: str, writer: bytes) -> int:
        self._read()
        return self.inner.get_collect_mark(jid, writer)

    def get_stdout_mark(self, jid: str, writer: bytes) -> tuple[int, int, int, int]:
        self._read()
        return self.inner.get_stdout_mark(jid, writer)
