"""The durable record of what a job's clients were given from its numbered streams in Redis (collect
results, print lines): each writer's highest index read, kept in the JobStore (SQL), which no one with
only the Redis URL can reset (``CollectMarkStore`` in engine/runtime/io/redis_collect.py,
``LineMarkStore`` in engine/security/replay.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from millstream.engine.jobmanager.job_store import JobStore


@dataclass(frozen=True)
class StoredCollectMarks:
    """One job's collect marks in the JobStore."""

    store: JobStore
    jid: str

    def highest(self, writer: bytes) -> int:
        return self.store.get_collect_mark(self.jid, writer)

    def save(self, highs: Mapping[bytes, int]) -> None:
        self.store.save_collect_marks(self.jid, highs)


@dataclass(frozen=True)
class StoredStdoutMarks:
    """One job's print-stream marks in the JobStore."""

    store: JobStore
    jid: str

    def highest(self, writer: bytes) -> tuple[int, int, int, int]:
        return self.store.get_stdout_mark(self.jid, writer)

    def save(self, marks: Mapping[bytes, tuple[int, int]], upto: int) -> None:
        self.store.save_stdout_marks(self.jid, marks, upto)

    def reset(self, upto: int) -> None:
        self.store.reset_stdout_marks(self.jid, upto)
