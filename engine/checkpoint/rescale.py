"""Restoring state, possibly at a new parallelism: operator matching and state redistribution.

Keyed state (timers included) moves in whole key groups (Flink's KeyGroupRangeAssignment),
except that state taken under an older key encoding is regrouped key by key (``regroup_keyed``);
operator list state is split evenly in order (Flink's RoundRobinOperatorStateRepartitioner),
and so are sources' split lists (``redistribute_splits``); union list state and broadcast
state are copied to every subtask. Pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint, OperatorInfo
from millstream.engine.checkpoint.messages import StateHandle, TaskId
from millstream.engine.checkpoint.state_origin import StateOrigin
from millstream.engine.runtime.key_groups import assign_to_key_group, key_group_range

KeyedSnapshot = Mapping[int, Mapping[str, list]]  # HeapKeyedStateBackend.snapshot_by_key_group()


class StateRestoreError(ValueError):
    pass


class NonRestoredStateError(StateRestoreError):
    def __init__(self, source: str, operators: Sequence[OperatorInfo]) -> None:
        names = ", ".join(o.describe() for o in operators)
        where = f" from '{source}'" if source else ""
        super().__init__(
            f"Failed to restore{where}: cannot map state for {names} to the new program, because the "
            "operator is not available in the new program. If you want to skip this state, allow "
            "non-restored state (--allowNonRestoredState / allowNonRestoredState=true)."
        )
        self.operators = tuple(operators)


@dataclass
class OperatorSubtaskState:
    """One operator's snapshot in one subtask: what a task serialises into its state handle."""

    keyed: dict[int, dict[str, list]] = field(default_factory=dict)  # key group -> state name -> [(key, value)]
    operator: dict[str, list] = field(default_factory=dict)  # list state, split evenly on rescale
    broadcast: dict[str, dict] = field(default_factory=dict)  # the same on every subtask

    def to_dict(self) -> dict[str, Any]:
        """msgpack-friendly: only string map keys."""
        return {
            "keyed": [
                [kg, {n: [[k, v] for k, v in entries] for n, entries in states.items()}]
                for kg, states in sorted(self.keyed.items())
            ],
            "operator": self.operator,
            "broadcast": {n: [[k, v] for k, v in m.items()] for n, m in self.broadcast.items()},
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "OperatorSubtaskState":
        return OperatorSubtaskState(
            keyed={
                int(kg): {n: [(_hashable(k), v) for k, v in entries] for n, entries in states.items()}
                for kg, states in d.get("keyed", ())
            },
            operator={n: list(v) for n, v in (d.get("operator") or {}).items()},
            broadcast={n: {_hashable(k): v for k, v in pairs} for n, pairs in (d.get("broadcast") or {}).items()},
        )


def _hashable(k: Any) -> Any:
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k


# -- redistribution ----------------------------------------------------------------


def select_key_groups(snapshots: Mapping[int, KeyedSnapshot], key_groups: range, max_parallelism: int) -> dict[int, dict[str, list]]:
    """The key groups in ``key_groups`` gathered from old subtasks' snapshots ({old subtask: snapshot})."""
    owner: dict[int, int] = {}
    out: dict[int, dict[str, list]] = {}
    for old_subtask, snap in sorted(snapshots.items()):
        for kg, states in snap.items():
            if not 0 <= kg < max_parallelism:
                raise StateRestoreError(
                    f"subtask {old_subtask} holds key group {kg}, outside 0..{max_parallelism - 1}; "
                    "the max parallelism of the state does not match"
                )
            if kg in owner:
                raise StateRestoreError(f"key group {kg} appears in the snapshots of subtasks {owner[kg]} and {old_subtask}")
            owner[kg] = old_subtask
            if kg in key_groups:
                out[kg] = {name: list(entries) for name, entries in states.items()}
    return out


def regroup_keyed(
    snapshots: Iterable[KeyedSnapshot],
    key_groups: range,
    max_parallelism: int,
    timer_prefix: str = "_timers/",
    key_spec: Any = None,
) -> dict[int, dict[str, list]]:
    """The entries of ``key_groups`` among keyed snapshots taken under an older key encoding, each key
    placed by its key group now. Encoding 1 put keys that Python calls equal (``1``, ``True``,
    ``1.0``) in different key groups, so one key may come from two old entries: timers (state names
    starting with ``timer_prefix``) are merged, and any other state is refused, since nothing says
    how its values combine."""
    out: dict[int, dict[str, list]] = {}
    found: dict[tuple[str, Any], tuple[Any, Any]] = {}  # (state name, key) -> (the key as first found, value)
    for snap in snapshots:
        for _old_group, states in sorted(snap.items()):
            for name, entries in states.items():
                timers = name.startswith(timer_prefix)
                for key, value in entries:
                    kg = assign_to_key_group(key, max_parallelism, key_spec)
                    if kg not in key_groups:
                        continue
                    first = found.get((name, key))
                    if first is None:
                        value = list(value) if timers else value  # a list of its own, to merge into
                        found[(name, key)] = (key, value)
                        out.setdefault(kg, {}).setdefault(name, []).append((key, value))
                    elif timers:
                        first[1].extend(value)
                    else:
                        raise StateRestoreError(
                            f"state '{name}' holds separate entries for the keys {first[0]!r} and {key!r}, which "
                            "are one key since key encoding 2 (equal keys share a key group); restoring would "
                            "lose one of them, so this snapshot cannot be restored"
                        )
    return out


def redistribute_keyed(
    snapshots: Sequence[KeyedSnapshot], new_parallelism: int, max_parallelism: int
) -> list[dict[int, dict[str, list]]]:
    """Keyed snapshots of every old subtask, regrouped into ``new_parallelism`` subtasks by key-group range."""
    _check_parallelism(new_parallelism, max_parallelism)
    by_old = dict(enumerate(snapshots))
    return [
        select_key_groups(by_old, key_group_range(max_parallelism, new_parallelism, i), max_parallelism)
        for i in range(new_parallelism)
    ]


def split_operator_state(states: Sequence[Mapping[str, list]], new_parallelism: int) -> list[dict[str, list]]:
    """Each list state's elements, concatenated in old-subtask order and cut into even contiguous
    shares (the first ones one longer). An unchanged parallelism keeps every subtask's own list."""
    if len(states) == new_parallelism:
        return [{n: list(v) for n, v in s.items()} for s in states]
    names = list(dict.fromkeys(n for s in states for n in s))
    out: list[dict[str, list]] = [{} for _ in range(new_parallelism)]
    for name in names:
        items = [x for s in states for x in s.get(name, ())]
        base, extra = divmod(len(items), new_parallelism)
        start = 0
        for i in range(new_parallelism):
            end = start + base + (1 if i < extra else 0)
            out[i][name] = items[start:end]
            start = end
    return out


def redistribute_splits(
    positions: Mapping[int, Sequence[Any] | None], subtask: int, parallelism: int, old_parallelism: int
) -> list[Any] | None:
    """A source subtask's splits to resume, from the old subtasks' reader positions ({old index: list of
    split states}). Unchanged parallelism: its own list. Otherwise every old list is concatenated in
    old-subtask order and cut into even shares, as operator list state is. None: nothing recorded."""
    if not positions:
        return None
    for i, p in positions.items():
        if p is not None and not isinstance(p, (list, tuple)):
            raise StateRestoreError(
                f"source subtask {i} recorded its position as {type(p).__name__} {p!r}, not a list of split "
                "states; this checkpoint was taken by an older version and cannot be resumed"
            )
    if parallelism == old_parallelism:
        own = positions.get(subtask)
        return None if own is None else list(own)
    ordered = [list(positions[i] or ()) for i in sorted(positions)]
    return split_operator_state([{"splits": p} for p in ordered], parallelism)[subtask]["splits"]


def restore_subtask(
    states: Mapping[int, OperatorSubtaskState],
    subtask: int,
    parallelism: int,
    old_parallelism: int,
    max_parallelism: int,
) -> OperatorSubtaskState:
    """One new subtask's share of an operator's state, from the old subtasks' states ({old index: state}).
    An old subtask that is absent wrote no state handle: it had no state."""
    _check_parallelism(parallelism, max_parallelism)
    if parallelism == old_parallelism and set(states) == {subtask}:
        own = states[subtask]
        return OperatorSubtaskState(
            dict(own.keyed), {n: list(v) for n, v in own.operator.items()}, {n: dict(m) for n, m in own.broadcast.items()}
        )
    ordered = [states[i] for i in sorted(states)]
    keyed = select_key_groups(
        {i: s.keyed for i, s in states.items()}, key_group_range(max_parallelism, parallelism, subtask), max_parallelism
    )
    if parallelism == old_parallelism:
        operator = {n: list(v) for n, v in states[subtask].operator.items()} if subtask in states else {}
    else:
        operator = split_operator_state([s.operator for s in ordered], parallelism)[subtask]
    source = states.get(subtask % old_parallelism) or (ordered[0] if ordered else OperatorSubtaskState())
    return OperatorSubtaskState(
        keyed=keyed,
        operator=operator,
        broadcast={n: dict(m) for n, m in source.broadcast.items()},
    )


def redistribute(
    states: Sequence[OperatorSubtaskState], new_parallelism: int, max_parallelism: int
) -> list[OperatorSubtaskState]:
    """Every new subtask's state from every old subtask's state."""
    by_old = dict(enumerate(states))
    return [restore_subtask(by_old, i, new_parallelism, len(states), max_parallelism) for i in range(new_parallelism)]


def _check_parallelism(parallelism: int, max_parallelism: int) -> None:
    if not 1 <= parallelism <= max_parallelism:
        raise StateRestoreError(f"parallelism {parallelism} must be between 1 and the max parallelism {max_parallelism}")


# -- matching operators and planning a restore -----------------------------------------


@dataclass(frozen=True)
class OperatorMapping:
    restored: dict[str, OperatorInfo]  # new operator id -> the saved operator whose state it takes
    skipped: tuple[OperatorInfo, ...]  # saved operators with state that no operator takes (allowed)


def match_operators(
    saved: Iterable[OperatorInfo],
    current: Iterable[OperatorInfo],
    with_state: Iterable[str],
    allow_non_restored_state: bool = False,
    source: str = "",
) -> OperatorMapping:
    """Match saved operators to the new program by operator id, or else by uid. Saved operators
    without state are ignored, as in Flink; one with state and no match is an error unless allowed."""
    current = list(current)
    by_id = {o.operator_id: o for o in current}
    by_uid = {o.uid: o for o in current if o.uid}
    stateful = set(with_state)
    restored: dict[str, OperatorInfo] = {}
    unmatched: list[OperatorInfo] = []
    for old in saved:
        if old.operator_id not in stateful:
            continue
        new = by_id.get(old.operator_id) or (by_uid.get(old.uid) if old.uid else None)
        if new is None:
            unmatched.append(old)
            continue
        if old.max_parallelism > 0 and new.max_parallelism != old.max_parallelism:
            raise StateRestoreError(
                f"the max parallelism ({new.max_parallelism}) of {new.describe()} does not match the max "
                f"parallelism ({old.max_parallelism}) its state was taken with; changing it is not supported"
            )
        restored[new.operator_id] = old
    if unmatched and not allow_non_restored_state:
        raise NonRestoredStateError(source, unmatched)
    return OperatorMapping(restored, tuple(unmatched))


@dataclass(frozen=True)
class OperatorRestore:
    """What one new subtask must read to restore one operator; goes into the TaskDeploymentDescriptor."""

    operator_id: str
    subtask: int
    parallelism: int
    old_parallelism: int
    max_parallelism: int
    handles: Mapping[int, StateHandle]  # old subtask -> handle; only its own when parallelism is unchanged
    # old subtask -> reader position (a list of split states). For display and planning: the task
    # resumes from the same positions as stored in its state handles (``redistribute_splits``).
    source_offsets: Mapping[int, Any] = field(default_factory=dict)
    # Every old subtask's handle when ``handles`` holds only this subtask's own (parallelism unchanged):
    # read only if its own state holds union list state, which every subtask gets whole.
    peer_handles: Mapping[int, StateHandle] = field(default_factory=dict)

    @property
    def key_groups(self) -> range:
        return key_group_range(self.max_parallelism, self.parallelism, self.subtask)

    def restore(self, states: Mapping[int, OperatorSubtaskState]) -> OperatorSubtaskState:
        """This subtask's share, given the loaded states of ``handles``."""
        return restore_subtask(states, self.subtask, self.parallelism, self.old_parallelism, self.max_parallelism)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "subtask": self.subtask,
            "parallelism": self.parallelism,
            "old_parallelism": self.old_parallelism,
            "max_parallelism": self.max_parallelism,
            "handles": [[i, h] for i, h in sorted(self.handles.items())],
            "source_offsets": [[i, o] for i, o in sorted(self.source_offsets.items())],
            "peer_handles": [[i, h] for i, h in sorted(self.peer_handles.items())],
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "OperatorRestore":
        return OperatorRestore(
            d["operator_id"], int(d["subtask"]), int(d["parallelism"]), int(d["old_parallelism"]),
            int(d["max_parallelism"]), {int(i): h for i, h in d["handles"]},
            {int(i): o for i, o in d.get("source_offsets", ())},
            {int(i): h for i, h in d.get("peer_handles", ())},
        )


@dataclass(frozen=True)
class TaskRestore:
    """The restore descriptor of one subtask: the TDD's ``restore`` field (``to_dict``)."""

    checkpoint_id: int
    is_savepoint: bool
    external_path: str | None
    operators: Mapping[str, OperatorRestore]
    # The job that wrote the checkpoint (not the one restoring: a savepoint restores into a new job),
    # and whether it is sealed in the previous release's format: what its state files are checked against.
    job_id: str = ""
    legacy_seal: bool = False

    @property
    def origin(self) -> StateOrigin:
        return StateOrigin(self.job_id, self.checkpoint_id, self.legacy_seal)

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "is_savepoint": self.is_savepoint,
            "external_path": self.external_path,
            "operators": {k: v.to_dict() for k, v in self.operators.items()},
            "job_id": self.job_id,
            "legacy_seal": self.legacy_seal,
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "TaskRestore":
        return TaskRestore(
            int(d["checkpoint_id"]), bool(d["is_savepoint"]), d.get("external_path"),
            {k: OperatorRestore.from_dict(v) for k, v in d["operators"].items()},
            str(d.get("job_id") or ""), bool(d.get("legacy_seal", False)),
        )


def plan_restore(
    checkpoint: CompletedCheckpoint,
    operators: Sequence[OperatorInfo],
    allow_non_restored_state: bool = False,
) -> dict[TaskId, TaskRestore]:
    """For every subtask of the new program, which handles to read for which operator."""
    mapping = match_operators(
        checkpoint.operators,
        operators,
        [op_id for op_id, handles in checkpoint.handles.items() if handles]
        + [op_id for op_id, offsets in checkpoint.source_offsets.items() if offsets],
        allow_non_restored_state,
        checkpoint.external_path or f"checkpoint {checkpoint.checkpoint_id}",
    )
    plan: dict[TaskId, dict[str, OperatorRestore]] = {}
    for new in operators:
        old = mapping.restored.get(new.operator_id)
        if old is None:
            continue
        handles = checkpoint.handles.get(old.operator_id, {})
        offsets = checkpoint.source_offsets.get(old.operator_id, {})
        max_p = old.max_parallelism if old.max_parallelism > 0 else new.max_parallelism
        for i in range(new.parallelism):
            same = new.parallelism == old.parallelism
            plan.setdefault((new.vertex_id, i), {})[new.operator_id] = OperatorRestore(
                new.operator_id, i, new.parallelism, old.parallelism, max_p,
                {j: h for j, h in handles.items() if not same or j == i},
                {j: o for j, o in offsets.items() if not same or j == i},
                dict(handles) if same else {},
            )
    return {
        tid: TaskRestore(
            checkpoint.checkpoint_id, checkpoint.is_savepoint, checkpoint.external_path, ops,
            checkpoint.job_id, checkpoint.seal_format == 1,
        )
        for tid, ops in plan.items()
    }
