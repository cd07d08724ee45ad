"""CompletedCheckpoint: a checkpoint every task acknowledged, and its ``_metadata`` document.

The metadata lists every state handle per operator and subtask, with the
operator's uid, parallelism, max parallelism and key-group ranges, and the
sources' offsets; it is everything a restore (possibly rescaled) needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from millstream.engine.checkpoint.messages import (
    CheckpointType,
    DiscardAction,
    NotifyAbortedAction,
    NotifyCompleteAction,
    StateHandle,
    TaskAck,
    TaskId,
)
from millstream.engine.runtime.key_groups import key_group_range

METADATA_FORMAT = "millstream-checkpoint-metadata"
METADATA_VERSION = 1


@dataclass(frozen=True)
class OperatorInfo:
    """One operator of the job as checkpoints see it; ``operator_id`` already encodes the uid when set."""

    operator_id: str
    vertex_id: str
    parallelism: int
    max_parallelism: int
    uid: str | None = None
    name: str = ""

    def describe(self) -> str:
        label = f"operator {self.operator_id}"
        if self.uid:
            label += f" (uid '{self.uid}')"
        if self.name:
            label += f" '{self.name}'"
        return label


def operators_of_job_graph(job_graph: Any) -> list[OperatorInfo]:
    """OperatorInfo for every operator of a JobGraph (``millstream.engine.graph.job_graph.JobGraph``)."""
    return [
        OperatorInfo(op.operator_id, v.id, v.parallelism, v.max_parallelism, op.uid, op.name)
        for v in job_graph.vertices
        for op in v.operators
    ]


@dataclass(frozen=True, eq=False)
class CompletedCheckpoint:
    job_id: str
    checkpoint_id: int
    checkpoint_type: CheckpointType
    trigger_timestamp: int
    completion_timestamp: int
    external_path: str | None
    operators: tuple[OperatorInfo, ...]
    handles: Mapping[str, Mapping[int, StateHandle]]  # operator id -> subtask -> handle
    source_offsets: Mapping[str, Mapping[int, Any]] = field(default_factory=dict)
    state_size: int = 0
    request_id: str | None = None
    # operator id -> subtask -> names of the shared files (incremental checkpoints) its state refers to
    shared: Mapping[str, Mapping[int, tuple[str, ...]]] = field(default_factory=dict)
    # How its files are sealed (set by the storage that read its _metadata, never by the file): 2, bound
    # to job and checkpoint; 1, the previous release's, bound to file names only (engine/checkpoint/storage.py).
    seal_format: int = 2
    # Actions for the caller, in this order: write the metadata, persist the pointer,
    # notify the tasks, then discard what this checkpoint subsumed.
    notify: NotifyCompleteAction | None = None
    notify_aborted: tuple[NotifyAbortedAction, ...] = ()  # older checkpoints still in flight, now dropped
    discard: tuple[DiscardAction, ...] = ()

    @property
    def is_savepoint(self) -> bool:
        return self.checkpoint_type.is_savepoint()

    @staticmethod
    def from_acks(
        job_id: str,
        checkpoint_id: int,
        checkpoint_type: CheckpointType,
        trigger_timestamp: int,
        completion_timestamp: int,
        external_path: str | None,
        acks: Mapping[TaskId, TaskAck],
        operators: Iterable[OperatorInfo],
        request_id: str | None = None,
    ) -> "CompletedCheckpoint":
        ops = {o.operator_id: o for o in operators}
        parallelism_of: dict[str, int] = {}
        for vid, sub in acks:
            parallelism_of[vid] = max(parallelism_of.get(vid, 0), sub + 1)
        handles: dict[str, dict[int, StateHandle]] = {}
        offsets: dict[str, dict[int, Any]] = {}
        shared: dict[str, dict[int, tuple[str, ...]]] = {}
        for (vid, sub), ack in sorted(acks.items()):
            for op_id, names in ack.shared_files.items():
                if names:
                    shared.setdefault(op_id, {})[sub] = tuple(names)
            for op_id, handle in ack.state_handles.items():
                if op_id not in ops:  # state from an operator the coordinator was not told about
                    ops[op_id] = OperatorInfo(op_id, vid, parallelism_of[vid], 0)
                handles.setdefault(op_id, {})[sub] = handle
            for op_id, offset in ack.source_offsets.items():
                offsets.setdefault(op_id, {})[sub] = offset
        return CompletedCheckpoint(
            job_id=job_id,
            checkpoint_id=checkpoint_id,
            checkpoint_type=checkpoint_type,
            trigger_timestamp=trigger_timestamp,
            completion_timestamp=completion_timestamp,
            external_path=external_path,
            operators=tuple(ops.values()),
            handles=handles,
            source_offsets=offsets,
            state_size=sum(a.state_size for a in acks.values()),
            request_id=request_id,
            shared=shared,
        )

    def shared_names(self) -> frozenset[str]:
        """Every shared file this checkpoint refers to (what the SharedStateRegistry counts)."""
        return frozenset(n for subs in self.shared.values() for names in subs.values() for n in names)

    def task_state(self, vertex_id: str, subtask: int) -> dict[str, StateHandle]:
        """The handles one subtask wrote, per operator: its restore input when parallelism is unchanged."""
        return {
            o.operator_id: self.handles[o.operator_id][subtask]
            for o in self.operators
            if o.vertex_id == vertex_id and subtask in self.handles.get(o.operator_id, {})
        }

    # -- the _metadata document ------------------------------------------
    def to_metadata(self) -> dict[str, Any]:
        operators = []
        for o in self.operators:
            subtasks = []
            for i in range(o.parallelism):
                entry: dict[str, Any] = {"index": i, "handle": self.handles.get(o.operator_id, {}).get(i)}
                if o.max_parallelism > 0:
                    kg = key_group_range(o.max_parallelism, o.parallelism, i)
                    entry["key_groups"] = [kg.start, kg.stop - 1]  # inclusive, as Flink's KeyGroupRange
                if i in self.source_offsets.get(o.operator_id, {}):
                    entry["source_offset"] = self.source_offsets[o.operator_id][i]
                if self.shared.get(o.operator_id, {}).get(i):
                    entry["shared"] = list(self.shared[o.operator_id][i])
                subtasks.append(entry)
            operators.append(
                {
                    "operator_id": o.operator_id,
                    "uid": o.uid,
                    "name": o.name,
                    "vertex_id": o.vertex_id,
                    "parallelism": o.parallelism,
                    "max_parallelism": o.max_parallelism,
                    "subtasks": subtasks,
                }
            )
        return {
            "format": METADATA_FORMAT,
            "version": METADATA_VERSION,
            "job_id": self.job_id,
            "checkpoint_id": self.checkpoint_id,
            "checkpoint_type": self.checkpoint_type.value,
            "is_savepoint": self.is_savepoint,
            "trigger_timestamp": self.trigger_timestamp,
            "completion_timestamp": self.completion_timestamp,
            "state_size": self.state_size,
            "operators": operators,
        }

    @staticmethod
    def from_metadata(meta: Mapping[str, Any], external_path: str | None = None) -> "CompletedCheckpoint":
        """Rebuild from ``to_metadata()``; raises KeyError/ValueError/TypeError on a malformed document."""
        if meta.get("format") != METADATA_FORMAT:
            raise ValueError(f"not a Millstream checkpoint metadata document (format {meta.get('format')!r})")
        if meta.get("version") != METADATA_VERSION:
            raise ValueError(f"unsupported metadata version {meta.get('version')!r}, expected {METADATA_VERSION}")
        operators = []
        handles: dict[str, dict[int, StateHandle]] = {}
        offsets: dict[str, dict[int, Any]] = {}
        shared: dict[str, dict[int, tuple[str, ...]]] = {}
        for o in meta["operators"]:
            op = OperatorInfo(
                str(o["operator_id"]), str(o["vertex_id"]), int(o["parallelism"]), int(o["max_parallelism"]),
                o.get("uid"), str(o.get("name", "")),
            )
            operators.append(op)
            for s in o["subtasks"]:
                if s.get("handle") is not None:
                    handles.setdefault(op.operator_id, {})[int(s["index"])] = s["handle"]
                if "source_offset" in s:
                    offsets.setdefault(op.operator_id, {})[int(s["index"])] = s["source_offset"]
                if s.get("shared"):
                    shared.setdefault(op.operator_id, {})[int(s["index"])] = tuple(str(n) for n in s["shared"])
        return CompletedCheckpoint(
            job_id=str(meta["job_id"]),
            checkpoint_id=int(meta["checkpoint_id"]),
            checkpoint_type=CheckpointType(meta["checkpoint_type"]),
            trigger_timestamp=int(meta["trigger_timestamp"]),
            completion_timestamp=int(meta["completion_timestamp"]),
            external_path=external_path,
            operators=tuple(operators),
            handles=handles,
            source_offsets=offsets,
            state_size=int(meta.get("state_size", 0)),
            shared=shared,
            seal_format=1 if meta.get("seal_format") == 1 else 2,
        )
