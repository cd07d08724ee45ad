"""Slot assignment: spreading over TaskManagers and slot sharing."""
from __future__ import annotations

from collections import Counter

import pytest

from millstream.engine.scheduler.slot_assignment import NotEnoughSlots, SlotId, pick_slots, subtask_slots


def test_spreads_evenly_across_equal_taskmanagers():
    chosen = pick_slots({"tm-a": [0, 1, 2, 3], "tm-b": [0, 1, 2, 3]}, 4)
    assert Counter(s.taskmanager_id for s in chosen) == {"tm-a": 2, "tm-b": 2}


def test_takes_one_slot_from_each_of_three_taskmanagers():
    chosen = pick_slots({"tm-c": [0, 1], "tm-a": [0, 1], "tm-b": [0, 1]}, 3)
    assert sorted(s.taskmanager_id for s in chosen) == ["tm-a", "tm-b", "tm-c"]


def test_takes_from_the_taskmanager_with_most_free_slots_first():
    free = {"tm-a": [0, 1, 2, 3], "tm-b": [5, 6]}
    chosen = pick_slots(free, 4)
    taken = Counter(s.taskmanager_id for s in chosen)
    assert taken == {"tm-a": 3, "tm-b": 1}
    left = {tm: len(slots) - taken[tm] for tm, slots in free.items()}
    assert max(left.values()) - min(left.values()) <= 1
    assert free == {"tm-a": [0, 1, 2, 3], "tm-b": [5, 6]}  # the input is not consumed


def test_choice_is_deterministic_and_never_repeats_a_slot():
    free = {"tm-b": [3, 1, 2], "tm-a": [2, 0, 1], "tm-c": [0]}
    chosen = pick_slots(free, 7)
    assert chosen == pick_slots(free, 7)
    assert len(set(chosen)) == 7
    assert all(s.index in free[s.taskmanager_id] for s in chosen)
    # Ties go to the smallest TaskManager id, lowest slot index first.
    assert chosen[:2] == [SlotId("tm-a", 0), SlotId("tm-b", 1)]


def test_needing_nothing_picks_nothing():
    assert pick_slots({"tm-a": [0]}, 0) == []
    assert pick_slots({}, 0) == []


def test_raises_not_enough_slots_with_needed_and_available():
    with pytest.raises(NotEnoughSlots) as info:
        pick_slots({"tm-a": [0], "tm-b": [0]}, 4)
    assert info.value.needed == 4
    assert info.value.available == 2
    assert str(info.value) == "waiting for resources: 4 slots needed, 2 available"


def test_no_taskmanagers_at_all():
    with pytest.raises(NotEnoughSlots) as info:
        pick_slots({}, 1)
    assert (info.value.needed, info.value.available) == (1, 0)


def test_subtask_slots_maps_subtask_i_of_every_vertex_to_slot_i():
    slots = [SlotId("tm-a", 0), SlotId("tm-b", 0), SlotId("tm-a", 1)]
    mapping = subtask_slots({"src": 3, "map": 1, "sink": 2}, slots)
    assert len(mapping) == 6
    for (vid, i), slot in mapping.items():
        assert slot == slots[i]
    assert mapping[("src", 0)] == mapping[("map", 0)] == mapping[("sink", 0)]
    assert set(mapping) == {("src", 0), ("src", 1), ("src", 2), ("map", 0), ("sink", 0), ("sink", 1)}


def test_a_job_needs_as_many_slots_as_its_highest_parallelism():
    parallelisms = {"src": 2, "agg": 4, "sink": 1}
    slots = pick_slots({"tm-a": [0, 1], "tm-b": [0, 1]}, max(parallelisms.values()))
    mapping = subtask_slots(parallelisms, slots)
    assert set(mapping.values()) == set(slots)
