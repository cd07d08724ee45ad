"""CheckpointStatsTracker: per-checkpoint and per-subtask statistics, counts and recent history.

Every checkpoint's statistics are one ``CheckpointStats`` whose ``to_record()``
is a plain JSON-able dict, so the JobManager can persist each record to SQL and
rebuild the tracker from those rows after a restart (``from_records``).
"""
from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Mapping

from millstream.engine.checkpoint.messages import CheckpointType, TaskAck

DEFAULT_HISTORY_SIZE = 10  # Flink's web.checkpoints.history
SUMMARY_WINDOW = 10_000  # completed checkpoints the summary percentiles look back over
SUMMARY_METRICS = (
    "checkpointed_size",
    "state_size",
    "end_to_end_duration",
    "alignment_buffered",
    "processed_data",
    "persisted_data",
)
JOBMANAGER_RESTARTED = "Checkpoint was aborted because the JobManager restarted."


class CheckpointStatsStatus(str, Enum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"

    def is_terminal(self) -> bool:
        return self is not CheckpointStatsStatus.IN_PROGRESS


# A completed checkpoint whose metadata could not be written still fails.
_ALLOWED = {
    CheckpointStatsStatus.IN_PROGRESS: {CheckpointStatsStatus.COMPLETED, CheckpointStatsStatus.FAILED},
    CheckpointStatsStatus.COMPLETED: {CheckpointStatsStatus.FAILED},
}


def stats_transition(current: CheckpointStatsStatus, target: CheckpointStatsStatus) -> CheckpointStatsStatus:
    if target not in _ALLOWED.get(current, set()):
        raise ValueError(f"checkpoint statistics cannot go from {current.value} to {target.value}")
    return target


@dataclass
class SubtaskStats:
    index: int
    ack_timestamp: int
    state_size: int = 0
    checkpointed_size: int = 0
    sync_ms: int = 0
    async_ms: int = 0
    alignment_ms: int = 0
    alignment_buffered: int = 0
    processed_data: int = 0
    persisted_data: int = 0
    start_delay_ms: int = 0

    @staticmethod
    def from_ack(index: int, ack: TaskAck, ack_timestamp: int) -> "SubtaskStats":
        return SubtaskStats(
            index=index,
            ack_timestamp=ack_timestamp,
            state_size=ack.state_size,
            checkpointed_size=ack.incremental_size,
            sync_ms=ack.sync_ms,
            async_ms=ack.async_ms,
            alignment_ms=ack.alignment_ms,
            alignment_buffered=ack.alignment_buffered_bytes,
            processed_data=ack.processed_bytes,
            persisted_data=ack.persisted_bytes,
            start_delay_ms=ack.start_delay_ms,
        )

    def to_record(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _sum(subtasks: Iterable[SubtaskStats], attr: str) -> int:
    return sum(getattr(s, attr) for s in subtasks)


@dataclass
class CheckpointStats:
    checkpoint_id: int
    checkpoint_type: CheckpointType
    trigger_timestamp: int
    num_subtasks: dict[str, int]  # vertex id -> parallelism, in the job's vertex order
    status: CheckpointStatsStatus = CheckpointStatsStatus.IN_PROGRESS
    subtasks: dict[str, dict[int, SubtaskStats]] = field(default_factory=dict)
    external_path: str | None = None
    discarded: bool = False
    failure_timestamp: int | None = None
    failure_message: str | None = None
    request_id: str | None = None

    @property
    def is_savepoint(self) -> bool:
        return self.checkpoint_type.is_savepoint()

    def all_subtasks(self) -> list[SubtaskStats]:
        return [s for per_vertex in self.subtasks.values() for s in per_vertex.values()]

    @property
    def total_subtasks(self) -> int:
        return sum(self.num_subtasks.values())

    @property
    def num_acknowledged(self) -> int:
        return sum(len(v) for v in self.subtasks.values())

    @property
    def latest_ack_timestamp(self) -> int:
        return max((s.ack_timestamp for s in self.all_subtasks()), default=-1)

    @property
    def end_to_end_duration(self) -> int:
        end = self.failure_timestamp if self.status is CheckpointStatsStatus.FAILED else self.latest_ack_timestamp
        return max(0, (end if end is not None else -1) - self.trigger_timestamp)

    def total(self, attr: str) -> int:
        return _sum(self.all_subtasks(), attr)

    def metric(self, name: str) -> int:
        """The summary metrics by their REST names."""
        if name == "end_to_end_duration":
            return self.end_to_end_duration
        return self.total(name)

    def acknowledge(self, vertex_id: str, sub: SubtaskStats) -> None:
        self.subtasks.setdefault(vertex_id, {})[sub.index] = sub

    # -- persistence -------------------------------------------------------
    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.checkpoint_id,
            "status": self.status.value,
            "checkpoint_type": self.checkpoint_type.value,
            "is_savepoint": self.is_savepoint,
            "trigger_timestamp": self.trigger_timestamp,
            "num_subtasks": dict(self.num_subtasks),
            "subtasks": {
                vid: [s.to_record() for _, s in sorted(per_vertex.items())]
                for vid, per_vertex in self.subtasks.items()
            },
            "external_path": self.external_path,
            "discarded": self.discarded,
            "failure_timestamp": self.failure_timestamp,
            "failure_message": self.failure_message,
            "request_id": self.request_id,
            # denormalised for SQL columns; from_record recomputes them
            "latest_ack_timestamp": self.latest_ack_timestamp,
            "state_size": self.total("state_size"),
            "checkpointed_size": self.total("checkpointed_size"),
            "end_to_end_duration": self.end_to_end_duration,
        }

    @staticmethod
    def from_record(r: Mapping[str, Any]) -> "CheckpointStats":
        return CheckpointStats(
            checkpoint_id=int(r["id"]),
            checkpoint_type=CheckpointType(r["checkpoint_type"]),
            trigger_timestamp=int(r["trigger_timestamp"]),
            num_subtasks={str(k): int(v) for k, v in r["num_subtasks"].items()},
            status=CheckpointStatsStatus(r["status"]),
            subtasks={
                str(vid): {int(s["index"]): SubtaskStats(**s) for s in subs}
                for vid, subs in (r.get("subtasks") or {}).items()
            },
            external_path=r.get("external_path"),
            discarded=bool(r.get("discarded", False)),
            failure_timestamp=r.get("failure_timestamp"),
            failure_message=r.get("failure_message"),
            request_id=r.get("request_id"),
        )


@dataclass(frozen=True)
class RestoredCheckpointStats:
    checkpoint_id: int
    restore_timestamp: int
    is_savepoint: bool
    external_path: str | None

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.checkpoint_id,
            "restore_timestamp": self.restore_timestamp,
            "is_savepoint": self.is_savepoint,
            "external_path": self.external_path,
        }

    @staticmethod
    def from_record(r: Mapping[str, Any]) -> "RestoredCheckpointStats":
        return RestoredCheckpointStats(int(r["id"]), int(r["restore_timestamp"]), bool(r["is_savepoint"]), r.get("external_path"))


class CheckpointStatsTracker:
    def __init__(self, history_size: int = DEFAULT_HISTORY_SIZE) -> None:
        self.history_size = history_size
        self.history: OrderedDict[int, CheckpointStats] = OrderedDict()  # oldest first
        self.live: dict[int, CheckpointStats] = {}  # in progress, even once out of the history window
        self.num_restored = 0
        self.num_total = 0
        self.num_completed = 0
        self.num_failed = 0
        self.latest_completed: CheckpointStats | None = None
        self.latest_savepoint: CheckpointStats | None = None
        self.latest_failed: CheckpointStats | None = None
        self.latest_restored: RestoredCheckpointStats | None = None
        self.summary: deque[tuple[int, dict[str, int]]] = deque(maxlen=SUMMARY_WINDOW)
        self._changed: dict[int, CheckpointStats] = {}
        self.max_id = 0  # the highest checkpoint id ever reported, beyond the history window

    @property
    def num_in_progress(self) -> int:
        return len(self.live)

    def get(self, checkpoint_id: int) -> CheckpointStats | None:
        return self.live.get(checkpoint_id) or self.history.get(checkpoint_id)

    def find_request(self, request_id: str) -> CheckpointStats | None:
        for s in [*self.live.values(), *reversed(self.history.values())]:
            if s.request_id == request_id:
                return s
        return None

    def take_changed_records(self) -> list[dict[str, Any]]:
        """Records changed since the last call, oldest id first: what to upsert into SQL."""
        out = [s.to_record() for _, s in sorted(self._changed.items())]
        self._changed.clear()
        return out

    # -- reports from the coordinator ---------------------------------------
    def report_pending(self, stats: CheckpointStats) -> None:
        self.num_total += 1
        self.live[stats.checkpoint_id] = stats
        self._remember(stats)

    def report_ack(self, checkpoint_id: int, vertex_id: str, sub: SubtaskStats) -> None:
        s = self.live.get(checkpoint_id)
        if s is not None:
            s.acknowledge(vertex_id, sub)
            self._changed[checkpoint_id] = s

    def report_completed(self, checkpoint_id: int, external_path: str | None) -> None:
        s = self.live.pop(checkpoint_id)
        s.status = stats_transition(s.status, CheckpointStatsStatus.COMPLETED)
        s.external_path = external_path
        self.num_completed += 1
        self.summary.append((checkpoint_id, {m: s.metric(m) for m in SUMMARY_METRICS}))
        self._set_latest_completed(s)
        self._changed[checkpoint_id] = s

    def report_failed(self, checkpoint_id: int, failure_timestamp: int, message: str) -> None:
        s = self.live.pop(checkpoint_id, None) or self.history.get(checkpoint_id)
        if s is None:
            return
        if s.status is CheckpointStatsStatus.COMPLETED:  # finalisation failed after all acks
            self.num_completed -= 1
            self.summary = deque((e for e in self.summary if e[0] != checkpoint_id), maxlen=SUMMARY_WINDOW)
            if self.latest_completed is s:
                self.latest_completed = None
            if self.latest_savepoint is s:
                self.latest_savepoint = None
        s.status = stats_transition(s.status, CheckpointStatsStatus.FAILED)
        s.failure_timestamp = failure_timestamp
        s.failure_message = message
        self.num_failed += 1
        self.latest_failed = s
        self._changed[checkpoint_id] = s

    def report_discarded(self, checkpoint_id: int) -> None:
        s = self.history.get(checkpoint_id)
        if s is not None:
            s.discarded = True
            self._changed[checkpoint_id] = s

    def undo_discarded(self, checkpoint_id: int) -> None:
        s = self.history.get(checkpoint_id)
        if s is not None and s.discarded:
            s.discarded = False
            self._changed[checkpoint_id] = s

    def report_restored(self, restored: RestoredCheckpointStats) -> dict[str, Any]:
        """Count a restore; returns its record to persist."""
        self.num_restored += 1
        self.latest_restored = restored
        return restored.to_record()

    # -- rebuilding after a JobManager restart --------------------------------
    @staticmethod
    def from_records(
        records: Iterable[Mapping[str, Any]],
        restored: Iterable[Mapping[str, Any]] = (),
        history_size: int = DEFAULT_HISTORY_SIZE,
        now_ms: int | None = None,
    ) -> "CheckpointStatsTracker":
        """Rebuild from every persisted record. With ``now_ms``, checkpoints that were in progress
        when the JobManager stopped are failed (their pending state died with it) and marked changed."""
        t = CheckpointStatsTracker(history_size)
        abandoned: dict[int, CheckpointStats] = {}
        for s in sorted((CheckpointStats.from_record(r) for r in records), key=lambda s: s.checkpoint_id):
            t.num_total += 1
            t._remember(s)
            if s.status is CheckpointStatsStatus.IN_PROGRESS:
                if now_ms is None:
                    t.live[s.checkpoint_id] = s
                    continue
                s.status = CheckpointStatsStatus.FAILED
                s.failure_timestamp, s.failure_message = now_ms, JOBMANAGER_RESTARTED
                abandoned[s.checkpoint_id] = s
            if s.status is CheckpointStatsStatus.COMPLETED:
                t.num_completed += 1
                t.summary.append((s.checkpoint_id, {m: s.metric(m) for m in SUMMARY_METRICS}))
                t._set_latest_completed(s)
            else:
                t.num_failed += 1
                t.latest_failed = s
        for r in restored:
            t.report_restored(RestoredCheckpointStats.from_record(r))
        t._changed = abandoned  # the rest is already persisted as it is
        return t

    def _remember(self, s: CheckpointStats) -> None:
        self.max_id = max(self.max_id, s.checkpoint_id)
        self.history[s.checkpoint_id] = s
        self.history.move_to_end(s.checkpoint_id)
        while len(self.history) > self.history_size:
            self.history.popitem(last=False)
        self._changed[s.checkpoint_id] = s

    def _set_latest_completed(self, s: CheckpointStats) -> None:
        if s.is_savepoint:
            self.latest_savepoint = s
        else:
            self.latest_completed = s
