"""State interfaces as user code sees them: MapState's mapping protocol and the StateTtlConfig builder."""
from __future__ import annotations

import pytest

from millstream.engine.common.time import Duration, Time
from millstream.engine.datastream.state import ListStateDescriptor, MapStateDescriptor, StateTtlConfig, ValueStateDescriptor
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend


def test_map_state_mapping_protocol_on_the_heap_backend():
    backend = HeapKeyedStateBackend(128)
    backend.current_key = "k"
    m = backend.get_map_state(MapStateDescriptor("m", None, None))
    assert m.is_empty() and "x" not in m and list(m) == []
    m["x"] = 1
    m["y"] = 2
    assert m["x"] == 1 and "x" in m and sorted(m) == ["x", "y"]
    m.put_all({"z": 3})
    m.put_all([("w", 4)])  # PyFlink's own put_all takes (key, value) pairs
    assert sorted(m.items()) == [("w", 4), ("x", 1), ("y", 2), ("z", 3)]
    del m["x"]
    assert "x" not in m and sorted(m.keys()) == ["w", "y", "z"] and sorted(m.values()) == [2, 3, 4]
    backend.current_key = "other"
    assert m.is_empty()  # scoped to the current key


def test_list_state_iterates_its_elements():
    backend = HeapKeyedStateBackend(128)
    backend.current_key = 1
    ls = backend.get_list_state(ListStateDescriptor("l", None))
    ls.add_all([1, 2])
    assert list(ls) == [1, 2]


def test_ttl_builder_defaults_and_options():
    c = StateTtlConfig.new_builder(Time.seconds(1)).build()
    assert c.get_ttl().to_milliseconds() == 1000
    assert c.get_update_type() is StateTtlConfig.UpdateType.OnCreateAndWrite
    assert c.get_state_visibility() is StateTtlConfig.StateVisibility.NeverReturnExpired
    assert c.is_enabled() and c.get_cleanup_strategies().is_cleanup_in_background()
    c = (
        StateTtlConfig.new_builder(Duration.of_seconds(2))
        .update_ttl_on_read_and_write()
        .return_expired_if_not_cleaned_up()
        .cleanup_full_snapshot()
        .cleanup_incrementally(7, True)
        .cleanup_in_rocksdb_compact_filter(99)
        .disable_cleanup_in_background()
        .build()
    )
    cs = c.get_cleanup_strategies()
    assert not cs.is_cleanup_in_background() and cs.in_full_snapshot()
    assert cs.get_incremental_cleanup_strategy().get_cleanup_size() == 7
    assert cs.get_rocksdb_compact_filter_cleanup_strategy().get_query_time_after_num_entries() == 99
    with pytest.raises(ValueError, match="positive"):
        StateTtlConfig.new_builder(Time.milliseconds(0))


def test_ttl_takes_effect_and_update_type_disabled_turns_it_off():
    now = [0]
    backend = HeapKeyedStateBackend(128, clock=lambda: now[0])
    backend.current_key = "k"
    expiring = ValueStateDescriptor("expiring", None)
    expiring.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(100)).build())
    disabled = ValueStateDescriptor("kept", None)
    disabled.enable_time_to_live(
        StateTtlConfig.new_builder(Time.milliseconds(100)).set_update_type(StateTtlConfig.UpdateType.Disabled).build()
    )
    a, b = backend.get_state(expiring), backend.get_state(disabled)
    a.update("x")
    b.update("y")
    now[0] = 500
    assert a.value() is None
    assert b.value() == "y"
