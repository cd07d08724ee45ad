"""Restoring at a new parallelism: key groups move whole, list state splits evenly, broadcast state is copied,
and state of operators that no longer exist is an error unless allowed."""
from __future__ import annotations

import json
from collections import Counter

import msgpack
import pytest

from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint, OperatorInfo
from millstream.engine.checkpoint.config import CheckpointConfig
from millstream.engine.checkpoint.coordinator import CheckpointCoordinator
from millstream.engine.checkpoint.messages import CheckpointType, TaskAck
from millstream.engine.checkpoint.rescale import (
    NonRestoredStateError,
    OperatorRestore,
    OperatorSubtaskState,
    StateRestoreError,
    TaskRestore,
    match_operators,
    plan_restore,
    redistribute,
    redistribute_keyed,
    split_operator_state,
)
from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage
from millstream.engine.datastream.state import ListStateDescriptor, ValueStateDescriptor
from millstream.engine.runtime.key_groups import assign_key_to_operator, assign_to_key_group, key_group_range
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend

MAX_P = 128
KEYS = [f"user-{i}" for i in range(500)] + list(range(300))


def snapshots_at(parallelism: int) -> list[dict]:
    """Keyed state as `parallelism` subtasks would hold it after a key_by, from real heap backends."""
    backends = [HeapKeyedStateBackend(MAX_P, clock=lambda: 0) for _ in range(parallelism)]
    for key in KEYS:
        b = backends[assign_key_to_operator(key, MAX_P, parallelism)]
        b.current_key = key
        b.get_state(ValueStateDescriptor("count")).update(len(str(key)))
        b.get_list_state(ListStateDescriptor("seen")).add(f"{key}!")
    return [b.snapshot_by_key_group() for b in backends]


def keys_of(snapshot: dict, state: str = "count") -> list:
    return [k for states in snapshot.values() for k, _ in states.get(state, ())]


def test_rescaling_2_to_3_to_1_keeps_every_key_exactly_once() -> None:
    two = snapshots_at(2)
    three = redistribute_keyed(two, 3, MAX_P)
    assert len(three) == 3
    for i, snap in enumerate(three):
        assert set(snap) <= set(key_group_range(MAX_P, 3, i))
        assert all(assign_key_to_operator(k, MAX_P, 3) == i for k in keys_of(snap))
    assert Counter(k for s in three for k in keys_of(s)) == Counter(KEYS)

    one = redistribute_keyed(three, 1, MAX_P)
    assert Counter(keys_of(one[0])) == Counter(KEYS)
    assert Counter(keys_of(one[0], "seen")) == Counter(KEYS)
    values = {k: v for states in one[0].values() for k, v in states["count"]}
    assert values["user-42"] == len("user-42") and values[7] == 1
    assert one[0] == redistribute_keyed(snapshots_at(1), 1, MAX_P)[0]


def test_a_key_group_held_twice_or_out_of_range_is_an_error() -> None:
    snap = {5: {"count": [("a", 1)]}}
    with pytest.raises(StateRestoreError, match="key group 5 appears in the snapshots of subtasks 0 and 1"):
        redistribute_keyed([snap, snap], 2, MAX_P)
    with pytest.raises(StateRestoreError, match="key group 200, outside 0..127"):
        redistribute_keyed([{200: {"count": [("a", 1)]}}], 2, MAX_P)
    with pytest.raises(StateRestoreError, match="parallelism 200 must be between 1 and the max parallelism 128"):
        redistribute_keyed([snap], 200, MAX_P)


def test_operator_list_state_splits_evenly_in_order() -> None:
    old = [{"offsets": ["a", "b", "c"], "other": [1]}, {"offsets": ["d", "e"]}]
    three = split_operator_state(old, 3)
    assert [s["offsets"] for s in three] == [["a", "b"], ["c", "d"], ["e"]]
    assert [s["other"] for s in three] == [[1], [], []]
    assert split_operator_state(old, 1) == [{"offsets": ["a", "b", "c", "d", "e"], "other": [1]}]
    assert split_operator_state(old, 2) == old  # unchanged parallelism: each keeps its own


def test_redistribute_moves_keyed_splits_lists_and_copies_broadcast_state() -> None:
    keyed = snapshots_at(2)
    old = [
        OperatorSubtaskState(keyed[i], {"buffer": [f"{i}-{j}" for j in range(4)]}, {"rules": {"r1": "x > 1", ("k", 2): i}})
        for i in range(2)
    ]
    new = redistribute(old, 3, MAX_P)
    assert Counter(k for s in new for k in keys_of(s.keyed)) == Counter(KEYS)
    assert sorted(x for s in new for x in s.operator["buffer"]) == sorted(x for s in old for x in s.operator["buffer"])
    assert [len(s.operator["buffer"]) for s in new] == [3, 3, 2]
    assert all(s.broadcast["rules"]["r1"] == "x > 1" for s in new)
    new[0].broadcast["rules"]["r1"] = "changed"  # each subtask owns its copy
    assert new[1].broadcast["rules"]["r1"] == "x > 1"


def test_operator_subtask_state_survives_msgpack() -> None:
    keyed = snapshots_at(1)[0]
    keyed.setdefault(0, {})["pairs"] = [(("tuple", 1), 5)]
    s = OperatorSubtaskState(keyed, {"offsets": [3, 4]}, {"rules": {("a", 1): "v", "b": [1, 2]}})
    back = OperatorSubtaskState.from_dict(msgpack.unpackb(msgpack.packb(s.to_dict())))
    assert back.keyed == s.keyed  # tuple keys come back as tuples
    assert back.operator == s.operator and back.broadcast == s.broadcast


# -- matching operators ------------------------------------------------------------------


SAVED = [
    OperatorInfo("id-src", "v1", 2, MAX_P, uid="source"),
    OperatorInfo("id-agg", "v2", 2, MAX_P, uid="agg"),
    OperatorInfo("id-gone", "v2", 2, MAX_P, uid="old-filter", name="Filter"),
    OperatorInfo("id-stateless-gone", "v2", 2, MAX_P),
]


def test_state_for_a_missing_operator_is_an_error_naming_it() -> None:
    current = [OperatorInfo("id-src", "v1", 3, MAX_P, "source"), OperatorInfo("id-agg", "v2", 3, MAX_P, "agg")]
    with pytest.raises(NonRestoredStateError) as e:
        match_operators(SAVED, current, ["id-src", "id-agg", "id-gone"], source="/sp/savepoint-1")
    msg = str(e.value)
    assert "id-gone" in msg and "'old-filter'" in msg and "/sp/savepoint-1" in msg
    assert "allowNonRestoredState" in msg
    assert "id-stateless-gone" not in msg  # operators without state do not matter


def test_allow_non_restored_state_skips_it() -> None:
    current = [OperatorInfo("id-src", "v1", 3, MAX_P, "source"), OperatorInfo("id-agg", "v2", 3, MAX_P, "agg")]
    m = match_operators(SAVED, current, ["id-src", "id-agg", "id-gone"], allow_non_restored_state=True)
    assert set(m.restored) == {"id-src", "id-agg"}
    assert [o.operator_id for o in m.skipped] == ["id-gone"]


def test_operators_match_by_uid_when_ids_differ_and_max_parallelism_must_not_change() -> None:
    renamed = [OperatorInfo("new-id", "vx", 1, MAX_P, "agg")]
    m = match_operators(SAVED, renamed, ["id-agg"])
    assert m.restored["new-id"].operator_id == "id-agg"
    with pytest.raises(StateRestoreError, match=r"max parallelism \(64\) .*does not match the max parallelism \(128\)"):
        match_operators(SAVED, [OperatorInfo("id-agg", "v2", 2, 64, "agg")], ["id-agg"])


# -- from acks through storage to a rescaled restore ----------------------------------------


def test_checkpoint_at_parallelism_2_restores_at_3_through_storage(tmp_path) -> None:
    job = "12" * 16
    ops = [OperatorInfo("op-src", "src", 2, MAX_P, "source"), OperatorInfo("op-agg", "agg", 2, MAX_P, "agg")]
    tasks = [(v, i) for v in ("src", "agg") for i in range(2)]
    storage = FileSystemCheckpointStorage(str(tmp_path))
    coord = CheckpointCoordinator(job, CheckpointConfig(interval_ms=100, storage_dir=str(tmp_path)), tasks[:2], tasks, ops)
    trigger = coord.trigger_checkpoint(0)
    keyed = snapshots_at(2)
    done = None
    for vid, i in tasks:
        op = "op-src" if vid == "src" else "op-agg"
        state = OperatorSubtaskState(operator={"offsets": [i * 10]}) if vid == "src" else OperatorSubtaskState(keyed[i])
        handle = storage.write_task_state(job, trigger.checkpoint_id, (vid, i), op, msgpack.packb(state.to_dict()), trigger.location)
        ack = TaskAck({op: handle}, 1, source_offsets={op: i * 10} if vid == "src" else {})
        done = coord.receive_ack(trigger.checkpoint_id, (vid, i), ack, 5) or done
    path = storage.write_metadata(job, done.checkpoint_id, done.to_metadata(), done.external_path)

    restored = CompletedCheckpoint.from_metadata(storage.read_metadata(path), path)
    new_ops = [OperatorInfo("op-src", "src", 3, MAX_P, "source"), OperatorInfo("op-agg", "agg", 3, MAX_P, "agg")]
    plan = {tid: TaskRestore.from_dict(json.loads(json.dumps(r.to_dict()))) for tid, r in plan_restore(restored, new_ops).items()}
    assert set(plan) == {(v, i) for v in ("src", "agg") for i in range(3)}

    def load(r: OperatorRestore) -> OperatorSubtaskState:
        loaded = {j: OperatorSubtaskState.from_dict(msgpack.unpackb(storage.read_task_state(h))) for j, h in r.handles.items()}
        return r.restore(loaded)

    aggs = [load(plan[("agg", i)].operators["op-agg"]) for i in range(3)]
    assert Counter(k for s in aggs for k in keys_of(s.keyed)) == Counter(KEYS)
    for i, s in enumerate(aggs):
        assert all(assign_to_key_group(k, MAX_P) in key_group_range(MAX_P, 3, i) for k in keys_of(s.keyed))
    srcs = [load(plan[("src", i)].operators["op-src"]) for i in range(3)]
    assert [s.operator["offsets"] for s in srcs] == [[0], [10], []]
    assert plan[("src", 2)].operators["op-src"].source_offsets == {0: 0, 1: 10}


def test_unchanged_parallelism_reads_only_its_own_handle() -> None:
    ops = [OperatorInfo("op", "v", 2, MAX_P)]
    cp = CompletedCheckpoint("j", 9, CheckpointType.CHECKPOINT, 0, 1, "/ck/chk-9", tuple(ops), {"op": {0: "/h0", 1: "/h1"}})
    plan = plan_restore(cp, ops)
    assert plan[("v", 1)].operators["op"].handles == {1: "/h1"}
    assert plan[("v", 1)].checkpoint_id == 9
    with pytest.raises(NonRestoredStateError, match="op"):
        plan_restore(cp, [OperatorInfo("other", "v", 2, MAX_P)])
    assert plan_restore(cp, [OperatorInfo("other", "v", 2, MAX_P)], allow_non_restored_state=True) == {}


def test_an_old_subtask_without_a_handle_had_no_state() -> None:
    keyed = snapshots_at(2)
    only_first = {0: OperatorSubtaskState(keyed[0], {"offsets": [1, 2, 3]})}
    r = OperatorRestore("op", 2, 3, 2, MAX_P, {0: "/h0"})
    share = r.restore(only_first)
    assert set(share.keyed) <= set(r.key_groups)
    assert share.operator == {"offsets": [3]}
    assert Counter(k for i in range(3) for k in keys_of(OperatorRestore("op", i, 3, 2, MAX_P, {}).restore(only_first).keyed)) == Counter(
        keys_of(keyed[0])
    )
