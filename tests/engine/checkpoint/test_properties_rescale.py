"""Property tests for rescaling: redistributing key groups (and operator list state) across any
chain of parallelisms, 2 -> 3 -> 1 among them, loses and duplicates nothing, and every key ends in
the subtask that owns its key group; state grouped by key encoding 1 is regrouped the same way."""
from __future__ import annotations

import dataclasses
import zlib
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millstream.engine.checkpoint.rescale import OperatorSubtaskState, StateRestoreError, redistribute, regroup_keyed
from millstream.engine.runtime.key_groups import assign_key_to_operator, assign_to_key_group, key_group_range
from tests.engine.runtime.test_key_encoding import _v1_key_bytes


@dataclasses.dataclass(frozen=True)
class Tile:
    x: int
    y: int


key_values = st.one_of(
    st.text(max_size=5),
    st.integers(-50, 50),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    st.tuples(st.text(max_size=3), st.integers(0, 9)),
    st.frozensets(st.integers(0, 20), max_size=3),
    st.builds(Tile, st.integers(0, 5), st.integers(0, 5)),
)


@st.composite
def jobs(draw: st.DrawFn) -> tuple[int, dict, list[int], list[int]]:
    max_p = draw(st.sampled_from([4, 16, 128]))
    state = draw(st.dictionaries(key_values, st.integers(), max_size=40))  # equal keys are one entry
    chain = draw(st.lists(st.integers(1, max_p), min_size=1, max_size=4))
    items = draw(st.lists(st.integers(), max_size=20))
    return max_p, state, [2, 3, 1] + chain, items


def _snapshots(state: dict, parallelism: int, max_p: int, items: list[int]) -> list[OperatorSubtaskState]:
    subtasks = [OperatorSubtaskState() for _ in range(parallelism)]
    for key, value in state.items():
        s = subtasks[assign_key_to_operator(key, max_p, parallelism)]
        kg = assign_to_key_group(key, max_p)
        s.keyed.setdefault(kg, {}).setdefault("count", []).append((key, value))
        s.keyed[kg].setdefault("_timers/user", []).append((key, [("EVENT_TIME", value, key)]))
    share = -(-len(items) // parallelism) if items else 0
    for i, s in enumerate(subtasks):
        s.operator["offsets"] = items[i * share : (i + 1) * share]
        s.broadcast["rules"] = {"r": 1}
    return subtasks


def _entries(states: list[OperatorSubtaskState], name: str) -> Counter:
    return Counter(
        (repr(k), repr(v)) for s in states for groups in s.keyed.values() for k, v in groups.get(name, ())
    )


@settings(max_examples=150, deadline=None)
@given(jobs())
def test_redistributing_key_groups_loses_and_duplicates_nothing(job):
    max_p, state, chain, items = job
    states = _snapshots(state, chain[0], max_p, items)
    want_keyed = _entries(states, "count")
    want_timers = _entries(states, "_timers/user")
    for parallelism in chain[1:]:
        if parallelism > max_p:
            continue
        states = redistribute(states, parallelism, max_p)
        assert len(states) == parallelism
        assert _entries(states, "count") == want_keyed
        assert _entries(states, "_timers/user") == want_timers
        for i, s in enumerate(states):
            owned = key_group_range(max_p, parallelism, i)
            for kg, groups in s.keyed.items():
                assert kg in owned
                for key, _ in groups["count"]:
                    assert assign_to_key_group(key, max_p) == kg
        # Operator list state: every element once, in the order of the old subtasks.
        assert [x for s in states for x in s.operator.get("offsets", [])] == items
        assert all(s.broadcast == {"rules": {"r": 1}} for s in states)


def _v1_group(key: Any, max_p: int) -> int:
    return zlib.crc32(_v1_key_bytes(key)) % max_p


@settings(max_examples=150, deadline=None)
@given(jobs())
def test_state_of_key_encoding_1_is_regrouped_by_its_keys(job):
    max_p, state, chain, _ = job
    old_p = chain[0]
    # Snapshots as encoding 1 grouped them: floats, frozensets and dataclasses elsewhere than now.
    old = [{} for _ in range(old_p)]
    for key, value in state.items():
        kg = _v1_group(key, max_p)
        old[kg * old_p // max_p].setdefault(kg, {}).setdefault("count", []).append((key, value))
    for new_p in chain[1:]:
        if new_p > max_p:
            continue
        restored: Counter = Counter()
        for i in range(new_p):
            share = regroup_keyed(old, key_group_range(max_p, new_p, i), max_p)
            for kg, groups in share.items():
                for key, value in groups["count"]:
                    assert assign_to_key_group(key, max_p) == kg
                    assert assign_key_to_operator(key, max_p, new_p) == i
                    restored[(repr(key), value)] += 1
        assert restored == Counter((repr(k), v) for k, v in state.items())


def test_regrouping_refuses_equal_keys_that_encoding_1_kept_apart():
    old = [{_v1_group(1, 128): {"count": [(1, 5)]}}, {_v1_group(True, 128): {"count": [(True, 2)]}}]
    with pytest.raises(StateRestoreError, match="separate entries for the keys 1 and True"):
        regroup_keyed(old, range(128), 128)
    # Timers of such keys are merged instead: a timer is a timer whichever key registered it.
    timers = [{_v1_group(1, 128): {"_timers/t": [(1, [("EVENT_TIME", 5, 1)])]}},
              {_v1_group(True, 128): {"_timers/t": [(True, [("EVENT_TIME", 7, True)])]}}]
    ((kg, groups),) = regroup_keyed(timers, range(128), 128).items()
    assert kg == assign_to_key_group(1, 128)
    assert groups == {"_timers/t": [(1, [("EVENT_TIME", 5, 1), ("EVENT_TIME", 7, True)])]}
