"""A heap table's change log (engine/runtime/state/change_log.py): batches of numbers copied into columns
on the task thread stand for the change set, and the delta's writer keeps each key's newest entry."""
from __future__ import annotations

import pytest

from millstream.engine.runtime.state import change_log
from millstream.engine.runtime.state.change_log import ChangeLog
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.heap_incremental import batch_access
from millstream.engine.runtime.state.heap_state_files import replay_tables
from millstream.engine.runtime.state.state_chain import DELTA

from tests.engine.runtime.state.test_heap_incremental import _base, _files


def _batch(t, pairs, values=True) -> None:
    keys = [k for k, _ in pairs]
    get, put, record = batch_access(t, keys)
    for k, v in pairs:
        put(k, v)
    record(keys, [v for _, v in pairs] if values else None)


def _logging_table(monkeypatch):
    """A backend whose "_reduce" table keeps a change log from its second interval on."""
    monkeypatch.setattr(change_log, "MIN_KEYS", 4)
    b = HeapKeyedStateBackend(128, incremental=True)
    t = b.table("_reduce", "value")
    store, write = _files()
    _batch(t, [(k, (k, 1)) for k in range(10)])  # batches of values: the next cut starts a log
    assert t.log is None and t.changed == set(range(10))
    chain = _base(b, 1, write, first=True)
    assert isinstance(t.log, ChangeLog) and not t.changed
    return b, t, store, write, chain


def _replay(store, chain):
    return replay_tables(chain, lambda name, index: store[name])["_reduce"]


def test_a_logged_batch_is_in_the_next_delta_with_its_newest_values(monkeypatch) -> None:
    b, t, store, write, chain = _logging_table(monkeypatch)
    _batch(t, [(3, (3, 2)), (4, (4, 2)), (3, (3, 3))])  # a key twice in a batch: the later value wins
    _batch(t, [(4, (4, 5))])
    assert not t.changed and t.log.entries == 4
    plan, read = b.begin_incremental_snapshot(2)
    assert isinstance(t.log, ChangeLog) and t.log.entries == 0  # a new log for the next interval
    _batch(t, [(3, (3, 9))])  # after the barrier: not in checkpoint 2, and no copy-on-write needed
    parts = read()
    assert parts.entries == 2
    assert _replay(store, (*chain, write("d2", DELTA, parts))) == {**{k: (k, 1) for k in range(10)}, 3: (3, 3), 4: (4, 5)}
    assert t.distinct == 0.5  # 2 keys over 4 records


def test_a_delete_moves_the_log_into_the_change_set_and_a_failed_log_yields_to_a_later_set(monkeypatch) -> None:
    """Checkpoint 2 (a log) never completes (no notification: its keys stay in the next delta); in the next interval a key of that log is deleted and another
    written through the table's own methods: checkpoint 3 holds both logs' keys, the set's keys from
    the table at its barrier (not the older logged values), and its deletion."""
    b, t, store, write, chain = _logging_table(monkeypatch)
    _batch(t, [(k, (k, 2)) for k in range(6)])
    b.begin_incremental_snapshot(2)  # never read nor confirmed
    _batch(t, [(7, (7, 3))])  # logged in interval 3
    del t[0]  # the log so far goes into the set, and the interval goes on there
    assert t.log is None and t.changed == {0, 7}
    t[1] = (1, 30)
    _batch(t, [(2, (2, 30))])  # recorded in the set now
    assert t.changed == {0, 1, 2, 7}
    plan, read3 = b.begin_incremental_snapshot(3)
    got = _replay(store, (*chain, write("d3", DELTA, read3())))
    assert got == {1: (1, 30), 2: (2, 30), 3: (3, 2), 4: (4, 2), 5: (5, 2), 6: (6, 1), 7: (7, 3), 8: (8, 1), 9: (9, 1)}


def test_two_logs_in_one_delta_and_values_of_several_specs(monkeypatch) -> None:
    b, t, store, write, chain = _logging_table(monkeypatch)
    _batch(t, [(1, 1.5), (2, 7)])
    _batch(t, [(2, 2.5)])  # floats after ints in one log: each key's newest, whatever its spec
    b.begin_incremental_snapshot(2)  # never read nor confirmed
    _batch(t, [(1, (1, 2)), (3, 4)])
    plan, read = b.begin_incremental_snapshot(3)
    got = _replay(store, (*chain, write("d3", DELTA, read())))
    assert got == {**{k: (k, 1) for k in range(10)}, 1: (1, 2), 2: 2.5, 3: 4}
    assert type(got[3]) is int and type(got[2]) is float


@pytest.mark.parametrize(
    "pairs",
    [[(1, [1])], [(1, {"a": 1})], [(1, (1, (2, 3)))]],
    ids=["list", "dict", "nested-tuple"],
)
def test_a_batch_of_values_that_may_change_in_place_stops_the_log_for_good(monkeypatch, pairs) -> None:
    """A mutable value (a list a reduce may append to later) never goes into a log: its barrier
    value is kept by the copy-on-write view of the change set. (A nested tuple cannot change, but
    the batch's type check looks one level deep and refuses it.)"""
    b, t, store, write, chain = _logging_table(monkeypatch)
    expected = {k: list(v) if type(v) is list else dict(v) if type(v) is dict else v for k, v in pairs}  # at the barrier
    _batch(t, [(5, (5, 2))])
    _batch(t, pairs)
    assert t.log is None and t.logs is False and t.changed == {5, *(k for k, _ in pairs)}
    plan, read = b.begin_incremental_snapshot(2)
    assert t.log is None  # and no log from now on
    if type(pairs[0][1]) is list:
        t[1].append(2)  # in place, after the barrier (through the table: the view saves it first)
    elif type(pairs[0][1]) is dict:
        t[1]["b"] = 2
    got = _replay(store, (*chain, write("d2", DELTA, read())))
    assert got[5] == (5, 2) and all(got[k] == v and type(got[k]) is type(v) for k, v in expected.items())


@pytest.mark.parametrize(
    "pairs",
    [[("a", 1)], [(1, "x")], [(1, True)], [(1, 2**70)], [(b"k", None)], [("w", ("w", 2.5, None, b"x"))]],
    ids=["str-key", "str-value", "bool", "big-int", "bytes-none", "mixed-tuple"],
)
def test_other_immutable_values_are_logged_as_objects_after_columns(monkeypatch, pairs) -> None:
    """Values that are no numbers for columns but cannot change in place are logged as the batch's
    objects; a log that held columns before is read back as objects too, each key's newest value of
    the exact type written, and changes after the barrier are not in the delta."""
    b, t, store, write, chain = _logging_table(monkeypatch)
    t.distinct = 0.5  # repeats, as last measured: read through the dict of each key's newest value
    _batch(t, [(5, (5, 2)), (6, (6, 2))])  # columns
    _batch(t, pairs)  # objects
    _batch(t, [(6, (6, 3))])  # the log holds objects now: no more columns
    assert t.log.refs and t.log.entries == 4 and not t.changed and t.logs
    plan, read = b.begin_incremental_snapshot(2)
    for k, _ in pairs:
        _batch(t, [(k, "after the barrier")])
    parts = read()
    assert parts.entries == 2 + len(pairs)
    got = _replay(store, (*chain, write("d2", DELTA, parts)))
    expected = {**{k: (k, 1) for k in range(10)}, 5: (5, 2), 6: (6, 3), **dict(pairs)}
    assert got == expected and all(type(got[k]) is type(v) for k, v in expected.items())
    assert got[pairs[0][0]] is not None or pairs[0][1] is None
    assert t.distinct == 3 / 4


def _string_table(monkeypatch):
    """A "_reduce" table of a reduce keyed by strings, logging from its second interval on."""
    monkeypatch.setattr(change_log, "MIN_KEYS", 4)
    b = HeapKeyedStateBackend(128, key_spec="STRING", incremental=True)
    t = b.table("_reduce", "value")
    store, write = _files()
    _batch(t, [(f"user-{k}", (f"user-{k}", 1)) for k in range(10)])
    chain = _base(b, 1, write, first=True)
    assert isinstance(t.log, ChangeLog)
    return b, t, store, write, chain


def test_a_reduce_keyed_by_strings_logs_its_batches_and_falls_back_to_the_set(monkeypatch) -> None:
    """Checkpoint 2 (a log of strings) never completes; in interval 3 a key is deleted after a
    logged batch: the log's keys go into the set, and checkpoint 3 holds both intervals' keys with
    their values at its barrier, and the deletion."""
    b, t, store, write, chain = _string_table(monkeypatch)
    _batch(t, [("user-1", ("user-1", 2)), ("user-2", ("user-2", 2)), ("user-1", ("user-1", 3))])
    assert t.log.text and not t.log.refs and t.log.entries == 3 and not t.changed  # as text columns
    b.begin_incremental_snapshot(2)  # never read nor confirmed
    _batch(t, [("user-3", ("user-3", 2)), ("user-new", ("user-new", 1))])
    del t["user-2"]
    assert t.log is None and t.changed == {"user-2", "user-3", "user-new"}
    _batch(t, [("user-4", ("user-4", 2))])  # into the set now
    plan, read = b.begin_incremental_snapshot(3)
    _batch(t, [("user-1", ("user-1", 99))])  # after the barrier
    parts = read()
    got = _replay(store, (*chain, write("d3", DELTA, parts)))
    expected = {f"user-{k}": (f"user-{k}", 1) for k in range(10)}
    expected.update({"user-1": ("user-1", 3), "user-3": ("user-3", 2), "user-4": ("user-4", 2), "user-new": ("user-new", 1)})
    del expected["user-2"]
    assert got == expected


def test_a_log_of_text_columns_then_objects_reads_back_each_keys_newest_value(monkeypatch) -> None:
    """A batch whose values text columns cannot hold (a None in a tuple) after batches that went as
    text columns: the log keeps it as objects and the writer reads the whole log as objects, in order."""
    b, t, store, write, chain = _string_table(monkeypatch)
    _batch(t, [("user-1", ("user-1", 2)), ("user-2", ("user-2", 2))])
    _batch(t, [("user-1", ("user-1", None)), ("user-3", ("user-3", 4))])
    _batch(t, [("user-2", ("user-2", 7))])
    assert t.log.text and t.log.refs and t.log.entries == 5
    plan, read = b.begin_incremental_snapshot(2)
    parts = read()
    expected = {f"user-{k}": (f"user-{k}", 1) for k in range(10)}
    expected.update({"user-1": ("user-1", None), "user-2": ("user-2", 7), "user-3": ("user-3", 4)})
    assert _replay(store, (*chain, write("d2", DELTA, parts))) == expected


def test_a_delta_of_logged_objects_is_grouped_by_key_group(monkeypatch) -> None:
    """Every part of the delta holds the keys of the one key group it is listed under, as the
    backend's own hash assigns them (a rescaled restore reads only its key groups' parts)."""
    from millstream.engine.runtime.key_groups import assign_to_key_group
    from millstream.engine.runtime.state.heap_state_files import frames

    b, t, store, write, chain = _string_table(monkeypatch)
    _batch(t, [(f"user-{k}", (f"user-{k}", 5)) for k in range(0, 300, 3)])
    plan, read = b.begin_incremental_snapshot(2)
    parts = read()
    assert parts.grouped and parts.entries == 100
    seen = set()
    for kg, payload in parts:
        for name, entries, gone in frames(payload):
            assert not gone and all(assign_to_key_group(k, 128, "STRING") == kg for k in entries)
            seen.update(entries)
    assert seen == {f"user-{k}" for k in range(0, 300, 3)}


def test_repeated_keys_go_back_to_the_change_set(monkeypatch) -> None:
    """More than two records a key of the table in one interval (a few hot keys): the log gives way
    to the set, and the next interval starts with the set. Up to two, it keeps logging (a fast task
    writing every key about one and a half times an interval stays on the log)."""
    b, t, store, write, chain = _logging_table(monkeypatch)
    for i in range(24):
        _batch(t, [(1, (1, i))])  # the cap: twice the table's 10 keys (1 / MIN_DISTINCT), and MIN_KEYS
    assert isinstance(t.log, ChangeLog) and t.log.entries == 24 and not t.changed
    _batch(t, [(1, (1, 24))])
    assert t.log is None and t.changed == {1} and t.distinct == 0.0
    plan, read = b.begin_incremental_snapshot(2)
    assert t.log is None
    assert _replay(store, (*chain, write("d2", DELTA, read())))[1] == (1, 24)


def test_a_small_table_or_a_batch_without_values_keeps_the_set(monkeypatch) -> None:
    monkeypatch.setattr(change_log, "MIN_KEYS", 100)
    b = HeapKeyedStateBackend(128, incremental=True)
    t = b.table("_reduce", "value")
    _, write = _files()
    _batch(t, [(k, k) for k in range(10)])
    _base(b, 1, write, first=True)
    assert t.log is None  # 10 keys: a set that stays in cache is cheaper
    monkeypatch.setattr(change_log, "MIN_KEYS", 4)
    b.begin_incremental_snapshot(2)
    assert isinstance(t.log, ChangeLog)
    _batch(t, [(1, 5)], values=False)  # a caller without the values: into the set
    assert t.log is None and t.changed == {1}


def test_a_batch_whose_function_failed_at_its_first_record_logs_nothing(monkeypatch) -> None:
    """The reduce records ``keys[:0], out[:0]`` when its function fails on a batch's first record."""
    from millstream.engine.runtime.state.state_columns import columns

    b, t, store, write, chain = _logging_table(monkeypatch)
    _batch(t, [(2, (2, 5))])
    get, put, record = batch_access(t, [3])
    record([], [])
    t.log.add(columns("_reduce", [], []))  # and an empty batch handed to the log directly
    assert t.log.entries == 1 and len(t.log.batches) == 1
    plan, read = b.begin_incremental_snapshot(2)
    assert _replay(store, (*chain, write("d2", DELTA, read())))[2] == (2, 5)


def test_a_log_of_distinct_keys_goes_as_written_and_a_key_logged_twice_still_reads_back_its_newest(monkeypatch) -> None:
    """While the records hit distinct keys (as last measured) a log of objects is written as logged,
    with no dict of the newest values: a key logged twice after all has both entries in the delta,
    in order, and the restore holds the later. Every MEASURE_EVERY-th log goes through the dict again
    and measures the share of distinct keys, which then decides."""
    from millstream.engine.runtime.state import heap_incremental

    b, t, store, write, chain = _string_table(monkeypatch)
    expected = {f"user-{k}": (f"user-{k}", 1) for k in range(10)}

    def checkpoint(cid: int, pairs: list) -> int:
        nonlocal chain
        for lo in range(0, len(pairs), 2):  # two records a batch: a key's entries may span batches
            _batch(t, pairs[lo : lo + 2])
        expected.update(pairs)
        plan, read = b.begin_incremental_snapshot(cid, compact=True, live=len(t))  # always a delta
        parts = read()
        chain = (*chain, write(f"d{cid}", DELTA, parts))
        b.changes.written(cid, chain)
        b.notify_checkpoint_complete(cid)
        assert _replay(store, chain) == expected
        return parts.entries

    twice = [("user-1", ("user-1", 2)), ("user-2", ("user-2", 2)), ("user-1", ("user-1", 3))]
    for cid in range(2, 2 + heap_incremental.MEASURE_EVERY):
        assert t.distinct == 1.0
        assert checkpoint(cid, twice) == 3  # as written: user-1 twice
        assert t.unmeasured == cid - 1
    # the next log is measured: 2 keys over 3 records, and written through the dict
    assert checkpoint(6, twice) == 2
    assert t.unmeasured == 0 and t.distinct == pytest.approx(2 / 3)
    # below ALL_DISTINCT every log is read through the dict (and measured again)
    assert checkpoint(7, [("user-5", ("user-5", 7)), ("user-5", ("user-5", 8))]) == 1
    assert t.distinct == 0.5 and t.unmeasured == 0
    assert checkpoint(8, [("user-6", ("user-6", 9)), ("user-7", ("user-7", 9))]) == 2
    assert t.distinct == 1.0 and t.unmeasured == 0
    assert checkpoint(9, [("user-6", ("user-6", 10)), ("user-6", ("user-6", 11))]) == 2  # as written again
    assert t.unmeasured == 1
