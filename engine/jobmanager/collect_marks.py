"""The durable record of which collect result entries a job's clients were given: each writer's highest
index, kept in the JobStore (SQL), which no one with only the Redis URL can reset
(engine/runtime/io/redis_collect.py's ``CollectMarkStore``)."""
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
