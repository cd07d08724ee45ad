"""Operator list state and union list state: the store, CheckpointedFunction hooks, and redistribution."""
from __future__ import annotations

import pytest

from millstream.engine.datastream.functions import CheckpointedFunction, CheckpointListener
from millstream.engine.datastream.state import ListStateDescriptor, MapStateDescriptor
from millstream.engine.runtime.state.operator_state import (
    DefaultOperatorStateStore,
    FunctionStateHandler,
    redistribute_operator_state,
)


class Offsets(CheckpointedFunction, CheckpointListener):
    def __init__(self) -> None:
        self.offsets: list = []
        self.shared: list = []
        self.restored = None
        self.completed: list[int] = []

    def initialize_state(self, context):
        store = context.get_operator_state_store()
        self.list = store.get_list_state(ListStateDescriptor("offsets", None))
        self.union = store.get_union_list_state(ListStateDescriptor("seen", None))
        self.restored = (context.is_restored(), context.get_checkpoint_id())
        self.offsets = list(self.list.get())
        self.shared = list(self.union.get())

    def snapshot_state(self, context):
        self.list.update(self.offsets)
        self.union.update(self.shared)
        self.snapshot_id = context.get_checkpoint_id()

    def notify_checkpoint_complete(self, checkpoint_id):
        self.completed.append(checkpoint_id)


def _snapshot(offsets: list, shared: list, cid: int = 1) -> dict:
    f = Offsets()
    h = FunctionStateHandler(f, "op")
    h.initialize(None, None)
    assert f.restored == (False, None)
    f.offsets, f.shared = offsets, shared
    snap = h.snapshot(cid, 123)
    assert f.snapshot_id == cid
    return snap


def test_list_state_is_split_evenly_and_union_state_goes_whole_to_every_subtask_2_to_3():
    old = [_snapshot([1, 2, 3], ["a"]), _snapshot([4, 5], ["b", "c"])]
    new = [redistribute_operator_state(old, i, 3) for i in range(3)]
    assert [n["list"]["offsets"] for n in new] == [[1, 2], [3, 4], [5]]
    assert all(n["union"]["seen"] == ["a", "b", "c"] for n in new)
    functions = []
    for i, state in enumerate(new):
        f = Offsets()
        FunctionStateHandler(f, "op").initialize(state, 7)
        assert f.restored == (True, 7)
        functions.append(f)
    assert sorted(x for f in functions for x in f.offsets) == [1, 2, 3, 4, 5]


def test_3_to_1_gathers_every_element_and_same_parallelism_keeps_each_its_own():
    old = [_snapshot([1], ["a"]), _snapshot([2, 3], ["b"]), _snapshot([], ["c"])]
    one = redistribute_operator_state(old, 0, 1)
    assert one["list"]["offsets"] == [1, 2, 3] and one["union"]["seen"] == ["a", "b", "c"]
    # Unchanged parallelism: a subtask reads only its own file (the others are None).
    own = redistribute_operator_state([None, old[1], None], 1, 3)
    assert own["list"]["offsets"] == [2, 3] and own["union"]["seen"] == ["b"]


def test_no_old_state_means_a_fresh_start():
    assert redistribute_operator_state([None, None], 0, 3) is None


def test_listener_hears_completions_and_plain_functions_cost_nothing():
    f = Offsets()
    h = FunctionStateHandler(f, "op")
    h.notify_checkpoint_complete(4)
    assert f.completed == [4]
    plain = FunctionStateHandler(lambda v: v, "op")
    assert not plain.checkpointed and plain.snapshot(1, 0) is None


def test_the_store_refuses_other_descriptors_and_mixing_list_with_union():
    store = DefaultOperatorStateStore("my sink")
    store.get_list_state(ListStateDescriptor("x", None)).add(1)
    with pytest.raises(TypeError, match="my sink.*union"):
        store.get_union_list_state(ListStateDescriptor("x", None))
    with pytest.raises(TypeError, match="ListStateDescriptor"):
        store.get_list_state(MapStateDescriptor("m", None, None))
    with pytest.raises(ValueError, match="None"):
        store.get_list_state(ListStateDescriptor("x", None)).add(None)
    assert store.snapshot() == {"list": {"x": [1]}, "union": {}}
