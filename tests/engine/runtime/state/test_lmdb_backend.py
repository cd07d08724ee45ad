"""The LMDB keyed state backend against the heap backend: every state type, eviction of values changed in
place, state far larger than the cache, snapshots, and the keyed and window operators driven on both."""
from __future__ import annotations

import copy
import os
import pickle
import random
from collections import Counter
from typing import Any

import pytest

from millstream.engine.datastream.functions import AggregateFunction, KeyedProcessFunction, ProcessWindowFunction, ReduceFunction
from millstream.engine.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from millstream.engine.runtime.operators.aligned_window import AlignedWindowOperator
from millstream.engine.runtime.operators.aligned_window_table import StateTableAlignedWindowOperator
from millstream.engine.runtime.operators.keyed import KeyedProcessOperator, ReduceOperator
from millstream.engine.runtime.operators.window import WindowOperator
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend, StateTypeMismatch
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.windowing.assigners import (
    CountTumblingWindowAssigner,
    EventTimeSessionWindows,
    GlobalWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from millstream.engine.windowing.evictors import CountEvictor
from millstream.engine.windowing.triggers import CountTrigger, PurgingTrigger
from tests.operator_context import keyed_context

MAX = 2**63 - 1


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_backend(kind: str, path, clock=None, max_parallelism: int = 128):
    if kind == "heap":
        return HeapKeyedStateBackend(max_parallelism, clock)
    cache = {"lmdb-cache-1": 1, "lmdb-cache-3": 3, "lmdb": 10_000}[kind]
    return LmdbKeyedStateBackend(max_parallelism, path / kind, cache_entries=cache, clock=clock)


@pytest.fixture(params=["heap", "lmdb", "lmdb-cache-1", "lmdb-cache-3"])
def backend(request, tmp_path, clock):
    b = make_backend(request.param, tmp_path, clock)
    yield b
    if isinstance(b, LmdbKeyedStateBackend):
        b.close()


@pytest.fixture
def lmdb_backend(tmp_path):
    def make(cache_entries: int, **kw: Any) -> LmdbKeyedStateBackend:
        b = LmdbKeyedStateBackend(128, tmp_path / f"state-{len(made)}", cache_entries=cache_entries, **kw)
        made.append(b)
        return b

    made: list[LmdbKeyedStateBackend] = []
    yield make
    for b in made:
        b.close()


KEYS = ["a", "b", "c", "d", "e"]


def at(backend, key):
    backend.current_key = key
    return backend


# -- every state type, on both backends ---------------------------------------------------


def test_value_state(backend):
    s = backend.get_state(ValueStateDescriptor("v"))
    for i, k in enumerate(KEYS):
        at(backend, k)
        assert s.value() is None
        s.update({"n": i, "seen": [k]})
    for i, k in enumerate(KEYS):
        at(backend, k)
        s.value()["seen"].append("again")  # in place, without update(): kept by both backends
    for i, k in enumerate(KEYS):
        at(backend, k)
        assert s.value() == {"n": i, "seen": [k, "again"]}
    at(backend, "b").get_state(ValueStateDescriptor("v")).update(None)
    at(backend, "c")
    s.clear()
    assert [at(backend, k) and s.value() for k in KEYS] == [
        {"n": 0, "seen": ["a", "again"]},
        None,
        None,
        {"n": 3, "seen": ["d", "again"]},
        {"n": 4, "seen": ["e", "again"]},
    ]


def test_list_state(backend):
    s = backend.get_list_state(ListStateDescriptor("l"))
    for round_ in range(3):
        for k in KEYS:
            at(backend, k)
            s.add((k, round_))
    at(backend, "a")
    s.add_all([1, 2])
    at(backend, "b")
    s.update([9])
    at(backend, "c")
    s.update([])
    at(backend, "d")
    s.clear()
    got = {k: list(at(backend, k) and s.get()) for k in KEYS}
    assert got == {
        "a": [("a", 0), ("a", 1), ("a", 2), 1, 2],
        "b": [9],
        "c": [],
        "d": [],
        "e": [("e", 0), ("e", 1), ("e", 2)],
    }
    at(backend, "e")
    s.get().append("not stored")  # get() hands out a copy
    assert list(s.get()) == [("e", 0), ("e", 1), ("e", 2)]
    assert set(backend.table("l", "list").keys()) == {"a", "b", "e"}


def test_map_state(backend):
    s = backend.get_map_state(MapStateDescriptor("m"))
    for i, k in enumerate(KEYS):
        at(backend, k)
        assert s.is_empty()
        s.put("x", i)
        s.put_all({"y": [i], "z": None})
    at(backend, "a")
    s.remove("x")
    s.remove("missing")
    at(backend, "b")
    for mk in ("x", "y", "z"):
        s.remove(mk)  # the last removal drops the key
    at(backend, "c")
    s.clear()
    at(backend, "d")
    assert s.get("y") == [3] and s.contains("z") and not s.contains("w") and s.get("w") is None
    assert sorted(s.keys()) == ["x", "y", "z"]
    assert sorted(s.items(), key=repr) == [("x", 3), ("y", [3]), ("z", None)]
    assert sorted(s.values(), key=repr) == [3, None, [3]]
    at(backend, "a")
    assert dict(s.items()) == {"y": [0], "z": None}
    assert set(backend.table("m", "map").keys()) == {"a", "d", "e"}


class Sum(ReduceFunction):
    def reduce(self, a, b):
        return a + b


class Average(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, acc):
        acc[0] += value  # accumulators changed in place, as user code does
        acc[1] += 1
        return acc

    def get_result(self, acc):
        return acc[0] / acc[1]


@pytest.mark.parametrize("fn", [Sum(), lambda a, b: a + b])
def test_reducing_state(backend, fn):
    s = backend.get_reducing_state(ReducingStateDescriptor("r", fn))
    for round_ in range(1, 4):
        for i, k in enumerate(KEYS):
            at(backend, k)
            s.add(i * round_)
    at(backend, "b")
    s.clear()
    assert [at(backend, k) and s.get() for k in KEYS] == [0, None, 12, 18, 24]


def test_aggregating_state(backend):
    s = backend.get_aggregating_state(AggregatingStateDescriptor("g", Average()))
    for round_ in range(1, 4):
        for i, k in enumerate(KEYS):
            at(backend, k)
            s.add(i * round_)
    at(backend, "e")
    s.clear()
    assert [at(backend, k) and s.get() for k in KEYS] == [0.0, 2.0, 4.0, 6.0, None]


def ttl(ms: int, *, on_read: bool = False, return_expired: bool = False) -> StateTtlConfig:
    b = StateTtlConfig.new_builder(ms)
    if on_read:
        b.update_ttl_on_read_and_write()
    if return_expired:
        b.return_expired_if_not_cleaned_up()
    return b.build()


def with_ttl(descriptor, cfg):
    descriptor.enable_time_to_live(cfg)
    return descriptor


def test_ttl_value_state_expires_and_is_cleaned_up_on_read(backend, clock):
    s = backend.get_state(with_ttl(ValueStateDescriptor("tv"), ttl(100)))
    for k in KEYS:
        at(backend, k)
        s.update([k])
    clock.now += 50
    at(backend, "a")
    s.update(["a2"])  # a write restarts the TTL
    at(backend, "b")
    assert s.value() == ["b"]  # a read does not
    clock.now += 60
    assert [at(backend, k) and s.value() for k in KEYS] == [["a2"], None, None, None, None]
    assert list(backend.table("tv", "ttl-value").keys()) == ["a"]


def test_ttl_value_state_refreshed_on_read_and_returning_expired(backend, clock):
    fresh = backend.get_state(with_ttl(ValueStateDescriptor("fresh"), ttl(100, on_read=True)))
    stale = backend.get_state(with_ttl(ValueStateDescriptor("stale"), ttl(100, return_expired=True)))
    for k in KEYS:
        at(backend, k)
        fresh.update(k)
        stale.update(k)
    for _ in range(3):
        clock.now += 80
        at(backend, "c")
        assert fresh.value() == "c"
    assert [at(backend, k) and fresh.value() for k in KEYS] == [None, None, "c", None, None]
    assert [at(backend, k) and stale.value() for k in KEYS] == KEYS


def test_ttl_list_state_expires_per_element(backend, clock):
    s = backend.get_list_state(with_ttl(ListStateDescriptor("tl"), ttl(100)))
    for k in KEYS:
        at(backend, k)
        s.add(1)
    clock.now += 60
    for k in KEYS[:2]:
        at(backend, k)
        s.add_all([2, 3])
    clock.now += 60
    assert [list(at(backend, k) and s.get()) for k in KEYS] == [[2, 3], [2, 3], [], [], []]
    assert sorted(backend.table("tl", "ttl-list").keys()) == ["a", "b"]


def test_ttl_map_state_expires_per_entry(backend, clock):
    s = backend.get_map_state(with_ttl(MapStateDescriptor("tm"), ttl(100, on_read=True)))
    for k in KEYS:
        at(backend, k)
        s.put("old", 1)
    clock.now += 60
    for k in KEYS:
        at(backend, k)
        s.put("new", 2)
    at(backend, "a")
    assert s.get("old") == 1  # refreshed by the read
    clock.now += 60
    assert [sorted(at(backend, k) and s.keys()) for k in KEYS] == [["new", "old"]] + [["new"]] * 4
    clock.now += 200
    assert all(at(backend, k) and s.is_empty() for k in KEYS)
    assert list(backend.table("tm", "ttl-map").keys()) == []


def test_reusing_a_name_with_another_kind_raises(backend):
    backend.get_state(ValueStateDescriptor("x"))
    backend.get_state(ValueStateDescriptor("x"))
    with pytest.raises(StateTypeMismatch, match="registered as value state, not list state"):
        backend.get_list_state(ListStateDescriptor("x"))
    with pytest.raises(StateTypeMismatch):
        backend.get_state(with_ttl(ValueStateDescriptor("x"), ttl(10)))
    assert backend.table("x", "value") is backend.table("x", "value")


# -- snapshots ------------------------------------------------------------------------------


def _random_ops(backend, clock, seed: int, keys: int = 60, steps: int = 3000) -> None:
    rng = random.Random(seed)
    value = backend.get_state(ValueStateDescriptor("value"))
    lst = backend.get_list_state(ListStateDescriptor("list"))
    mp = backend.get_map_state(MapStateDescriptor("map"))
    red = backend.get_reducing_state(ReducingStateDescriptor("reducing", Sum()))
    agg = backend.get_aggregating_state(AggregatingStateDescriptor("aggregating", Average()))
    tv = backend.get_state(with_ttl(ValueStateDescriptor("ttl-value"), ttl(500)))
    raw = backend.table("raw", "window")
    for _ in range(steps):
        k = rng.choice([rng.randrange(keys), f"k{rng.randrange(keys)}", (rng.randrange(5), "t")])
        backend.current_key = k
        op, x = rng.randrange(12), rng.randrange(100)
        if op == 0:
            value.update(x if x % 7 else None)
        elif op == 1:
            lst.add(x)
        elif op == 2:
            lst.update([] if x % 5 == 0 else [x, x])
        elif op == 3:
            mp.put(x % 4, x)
        elif op == 4:
            mp.remove(x % 4)
        elif op == 5:
            red.add(x)
        elif op == 6:
            agg.add(x)
        elif op == 7:
            tv.value() if x % 2 else tv.update(x)
            clock.now += 7
        elif op == 8:
            raw.setdefault(k, {}).setdefault(x % 3, []).append(x)  # the window operator's pattern
        elif op == 9:
            windows = raw.get(k)
            if windows:
                windows.pop(next(iter(windows)))
                if not windows:
                    del raw[k]
        elif op == 10:
            (value, lst, mp, red, agg)[x % 5].clear()
        else:
            raw.pop(k, None)


def _normalised(snapshot):
    return {kg: {name: sorted(pairs, key=repr) for name, pairs in states.items()} for kg, states in snapshot.items()}


@pytest.mark.parametrize("cache", [1, 7, 100_000])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_snapshot_by_key_group_is_the_heap_backends(tmp_path, seed, cache):
    heap_clock, lmdb_clock = Clock(), Clock()
    heap = HeapKeyedStateBackend(32, heap_clock)
    with LmdbKeyedStateBackend(32, tmp_path / "s", cache_entries=cache, clock=lmdb_clock) as disk:
        _random_ops(heap, heap_clock, seed)
        _random_ops(disk, lmdb_clock, seed)
        expected = heap.snapshot_by_key_group()
        assert len(expected) > 10
        assert _normalised(disk.snapshot_by_key_group()) == _normalised(expected)
        for name, table in heap.tables.items():
            assert dict(disk.tables[name].items()) == table
            assert len(disk.tables[name]) == len(table)


# -- the cache ---------------------------------------------------------------------------------


def test_in_place_changes_to_nested_values_survive_eviction(lmdb_backend):
    b = lmdb_backend(2)
    t = b.table("t", "window")
    for k in range(1000):
        t[k] = {"xs": [], "inner": {"n": 0}}
    for round_ in range(3):
        for k in range(1000):
            v = t.get(k)
            v["xs"].append(round_)
            v["inner"]["n"] += k
            t.setdefault(k, None)["inner"].setdefault("extra", []).append(round_)
    assert len(b._cache) <= 2
    for k in range(0, 1000, 37):
        assert t[k] == {"xs": [0, 1, 2], "inner": {"n": 3 * k, "extra": [0, 1, 2]}}
    snap = {k: v for states in b.snapshot_by_key_group().values() for k, v in states["t"]}
    assert snap == {k: {"xs": [0, 1, 2], "inner": {"n": 3 * k, "extra": [0, 1, 2]}} for k in range(1000)}


def test_the_current_keys_entries_are_not_evicted_while_the_operator_holds_them(lmdb_backend):
    # WindowOperator keeps `windows = contents.get(key)` while its trigger reads and writes other keys.
    b = lmdb_backend(1)
    contents, triggers = b.table("contents", "window"), b.table("triggers", "window")
    for key in range(50):
        b.current_key = key
        windows = contents.get(key)
        if windows is None:
            windows = contents[key] = {}
        for w in range(5):
            windows.setdefault(w, []).append(key)
            slot = triggers.get((key, w))
            if slot is None:
                triggers[(key, w)] = {"count": 1}
            else:
                slot["count"] += 1
            windows[w].append("after the trigger")
    b.current_key = None
    for key in range(50):
        assert contents[key] == {w: [key, "after the trigger"] for w in range(5)}
        assert all(triggers[(key, w)] == {"count": 1} for w in range(5))


def test_state_far_larger_than_the_cache_round_trips(lmdb_backend):
    b = lmdb_backend(100)
    t = b.table("big", "value")
    n = 50_000
    for k in range(n):
        t[f"key-{k}"] = (k, [k])
    for k in range(0, n, 3):
        t[f"key-{k}"][1].append("x")
    assert len(b._cache) <= 100
    assert len(t) == n
    for k in range(n):
        assert t[f"key-{k}"] == (k, [k, "x"] if k % 3 == 0 else [k])
    seen = Counter(k for k, _ in t.items())
    assert len(seen) == n and set(seen.values()) == {1}


def test_iteration_has_no_duplicates_after_partial_eviction(lmdb_backend):
    b = lmdb_backend(10)
    t = b.table("t", "list")
    for k in range(100):
        t[k] = [k]
    for k in (3, 50, 97, 98, 99):  # some evicted, some cached: now cached and changed
        t[k].append(-1)
    del t[98]
    t[1000] = ["new"]  # cached only
    items = list(t.items())
    assert len(items) == len({k for k, _ in items}) == 100
    expected = {k: [k] for k in range(100) if k != 98} | {1000: ["new"]}
    for k in (3, 50, 97, 99):
        expected[k] = [k, -1]
    assert dict(items) == expected
    assert sorted(t) == sorted(expected) and sorted(t.keys()) == sorted(expected)
    assert sorted(map(repr, t.values())) == sorted(map(repr, expected.values()))
    assert len(t) == 100 and bool(t)
    assert t == expected


def test_deleting_an_evicted_key_removes_it_from_disk(lmdb_backend):
    b = lmdb_backend(5)
    t = b.table("t", "value")
    for k in range(100):
        t[k] = k * 10
    assert 0 not in {ck[1] for ck in b._cache}  # evicted
    del t[0]
    assert t.pop(1) == 10
    assert t.pop(2, None) == 20 and t.pop(2, None) is None
    with pytest.raises(KeyError):
        del t[0]
    with pytest.raises(KeyError):
        t.pop(0)
    for k in range(3, 100):  # push the deletions out of the cache
        t[k] += 1
    assert 0 not in t and t.get(1) is None and len(t) == 97
    assert sorted(k for states in b.snapshot_by_key_group().values() for k, _ in states["t"]) == list(range(3, 100))
    t.clear()
    assert len(t) == 0 and list(t.items()) == [] and t.get(50) is None


def test_writes_are_batched_one_transaction_per_eviction_batch(lmdb_backend):
    b = lmdb_backend(100)
    writes = []
    env = b._env

    class CountingEnv:
        def begin(self, *a, **kw):
            if kw.get("write"):
                writes.append(1)
            return env.begin(*a, **kw)

        def __getattr__(self, name):
            return getattr(env, name)

    b._env = CountingEnv()
    t = b.table("t", "value")
    for k in range(10_000):
        t[k] = [k]
    assert len(writes) <= 10_000 // 10 + 1  # evictions write a tenth of the cache at a time
    before = len(writes)
    b.flush()
    assert len(writes) == before + 1
    b._env = env


def test_entries_only_read_and_immutable_are_not_written_back(lmdb_backend):
    b = lmdb_backend(10)
    t = b.table("t", "value")
    for k in range(100):
        t[k] = (k, "immutable")
    b.flush()
    t[5]
    entry = next(e for e in b._cache.values() if e.key == 5)
    assert not entry.dirty
    t.get(5)
    t[6] = [6]
    assert next(e for e in b._cache.values() if e.key == 6).dirty


def test_equal_keys_are_one_entry(lmdb_backend):
    b = lmdb_backend(3)
    t = b.table("t", "value")
    t[1] = "int"
    t[1.0] = "float"
    t[True] = "bool"
    a = "".join(["a", "b"])
    t[("ab", "ab")] = "pair of one string"
    t[(a, "ab")] = "pair of two strings"
    t[(1, 2.0)] = "tuple"
    t[(True, 2)] = "tuple again"
    for k in range(20):
        t[f"churn-{k}"] = k
    assert t[1] == t[1.0] == "bool" and t[("ab", a)] == "pair of two strings" and t[(1, 2)] == "tuple again"
    keys = [k for k in t if not (isinstance(k, str) and k.startswith("churn"))]
    assert len(keys) == 3
    assert 1 in keys and type(next(k for k in keys if k == 1)) is int  # the key first written is kept, as in a dict
    assert (1, 2.0) in keys and type(next(k for k in keys if k == (1, 2))[1]) is float


def test_keys_longer_than_lmdb_allows(lmdb_backend):
    b = lmdb_backend(2)
    t = b.table("t", "value")
    long_keys = [("x" * 2000, i) for i in range(10)]
    for i, k in enumerate(long_keys):
        t[k] = i
    for k in range(10):
        t[k] = k
    assert [t[k] for k in long_keys] == list(range(10))
    assert sorted(t.items(), key=repr) == sorted([(k, i) for i, k in enumerate(long_keys)] + [(k, k) for k in range(10)], key=repr)
    snap = {k: v for states in b.snapshot_by_key_group().values() for k, v in states["t"]}
    assert snap[long_keys[3]] == 3


def test_the_map_grows_when_it_fills(lmdb_backend):
    b = lmdb_backend(50, map_size=64 * 1024)
    t = b.table("t", "value")
    for k in range(3000):
        t[k] = "v" * 500
    b.flush()
    assert len(t) == 3000 and t[0] == "v" * 500


def test_an_unpicklable_value_is_reported_with_its_state_and_kept(lmdb_backend):
    b = lmdb_backend(2)
    t = b.table("fns", "value")
    t["f"] = lambda: 1
    with pytest.raises(TypeError, match="state 'fns' holds a value for key 'f' that cannot be pickled"):
        for k in range(5):
            t[k] = k
    assert callable(t["f"])


def test_close_deletes_the_working_copy_and_opening_discards_an_old_one(tmp_path):
    path = tmp_path / "state"
    with LmdbKeyedStateBackend(8, path) as b:
        b.table("t", "value")["k"] = 1
        b.flush()
        assert os.path.exists(path / "data.mdb")
    assert not path.exists()
    with pytest.raises(ValueError, match="closed"):
        b.table("u", "value")
    b.close()  # twice is fine
    b1 = LmdbKeyedStateBackend(8, path)
    b1.table("t", "value")["k"] = 1
    b1.flush()
    b1._env.close()  # a crash: the files stay
    b1._env = None
    b2 = LmdbKeyedStateBackend(8, path)
    assert b2.table("t", "value").get("k") is None and b2.snapshot_by_key_group() == {}
    b2.close()


def test_a_snapshot_is_plain_data(lmdb_backend):
    b = lmdb_backend(4)
    b.current_key = "k"
    b.get_list_state(ListStateDescriptor("l")).add(1)
    snap = b.snapshot_by_key_group()
    assert pickle.loads(pickle.dumps(snap)) == snap == {next(iter(snap)): {"l": [("k", [1])]}}


# -- the operators, driven on both backends -------------------------------------------------------


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, int | None]] = []
        self.watermarks: list[int] = []

    def emit(self, values, timestamps) -> None:
        ts = timestamps if timestamps is not None else [None] * len(values)
        self.records.extend(zip(copy.deepcopy(values), ts))  # as sent: state may change the objects later

    def emit_watermark(self, watermark) -> None:
        self.watermarks.append(watermark)

    def emit_status(self, idle) -> None:
        pass


def run_operator(cls, function, backend, steps, now: list[int], job_type="STREAMING", **params):
    ctx = keyed_context("op", lambda: now[0], backend=backend, job_type=job_type)
    p = {"trigger": None, "evictor": None, "allowed_lateness": 0, "late_tag": "late", "window_function": None}
    p.update(params)
    op = cls(function, ctx, p)
    out, late = Collect(), Collect()
    op.output, op.side_outputs["late"] = out, late
    op.open()
    for batch, wm in steps:
        if batch:
            op.process_batch([v for v, _ in batch], [t for _, t in batch] if batch[0][1] is not None else None)
        if wm is not None:
            now[0] = wm
            op.process_watermark(wm)
            op.on_tick(wm)
    op.process_watermark(MAX)
    op.end_input()
    return out.records, late.records, ctx.metrics.late_records_dropped, backend.snapshot_by_key_group()


def _stream(seed: int, keys: int = 40, n: int = 1500, timestamps: bool = True):
    rng = random.Random(seed)
    base, wm, steps, i = 0, -(2**63), [], 0
    while i < n:
        batch = []
        for _ in range(rng.randint(1, 30)):
            base += rng.randint(0, 6)
            v = (f"k{rng.randrange(keys)}", rng.randint(1, 9))
            batch.append((v, base + rng.randint(-80, 20) if timestamps else None))
            i += 1
        wm = max(wm, base - rng.randint(0, 40))
        steps.append((batch, wm))
    return steps


def _assert_same_on_both(tmp_path, cls, function, steps, cache, disk_cls=None, **params):
    heap = run_operator(cls, copy.deepcopy(function), HeapKeyedStateBackend(128), steps, [0], **params)
    with LmdbKeyedStateBackend(128, tmp_path / f"op-{cache}", cache_entries=cache) as disk:
        got = run_operator(disk_cls or cls, copy.deepcopy(function), disk, steps, [0], **params)
    if disk_cls is None:
        assert got[0] == heap[0]
    else:  # another operator: the keys of one firing may come out in another order
        assert sorted(map(repr, got[0])) == sorted(map(repr, heap[0]))
    assert got[1:3] == heap[1:3]
    assert _normalised(got[3]) == _normalised(heap[3])
    assert heap[0]
    return heap


def add_counts(a, b):
    return (a[0], a[1] + b[1])


def merge_into_dict(a, b):
    """A reduce that changes its accumulator in place."""
    acc = a if isinstance(a, dict) else {"key": a[0], "n": a[1], "seen": [a[1]]}
    acc["n"] += b[1]
    acc["seen"].append(b[1])
    return acc


class Contents(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield (key, getattr(w, "start", None), tuple(sorted(v for _, v in elements)))


class CountAndSum(AggregateFunction):
    def create_accumulator(self):
        return {"count": 0, "sum": 0}

    def add(self, value, acc):
        acc["count"] += 1
        acc["sum"] += value[1]
        return acc

    def get_result(self, acc):
        return (acc["count"], acc["sum"])

    def merge(self, a, b):
        return {"count": a["count"] + b["count"], "sum": a["sum"] + b["sum"]}


CACHES = [1, 3, 50]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [add_counts, merge_into_dict])
@pytest.mark.parametrize("job_type", ["STREAMING", "BATCH"])
def test_reduce_operator(tmp_path, cache, fn, job_type):
    steps = [(batch, None) for batch, _ in _stream(7, timestamps=False)]
    heap = HeapKeyedStateBackend(128)
    expected = run_operator(ReduceOperator, fn, heap, steps, [0], job_type=job_type)
    with LmdbKeyedStateBackend(128, tmp_path / "r", cache_entries=cache) as disk:
        got = run_operator(ReduceOperator, fn, disk, steps, [0], job_type=job_type)
    if job_type == "BATCH":  # one record per key at the end, in each backend's own key order
        assert Counter(map(repr, got[0])) == Counter(map(repr, expected[0])) and len(got[0]) == 40
    elif fn is add_counts:
        assert got[0] == expected[0]
    else:
        # An in-place reduce emits its accumulator object, which the rest of the batch keeps changing on the
        # heap; after an eviction the LMDB backend's later records hold a new object. Each key's last record agrees.
        def last(records):
            return {v["key"] if isinstance(v, dict) else v[0]: v for v, _ in records}

        assert last(got[0]) == last(expected[0])
    assert _normalised(got[3]) == _normalised(expected[3])


WINDOW_JOBS = {
    "tumbling-process": (Contents(), dict(assigner=TumblingEventTimeWindows.of(50), function_kind="process")),
    "sliding-aggregate": (CountAndSum(), dict(assigner=SlidingEventTimeWindows.of(60, 20), function_kind="aggregate")),
    "tumbling-reduce-in-place-lateness": (
        merge_into_dict,
        dict(assigner=TumblingEventTimeWindows.of(40), function_kind="reduce", allowed_lateness=30),
    ),
    "session-count-trigger": (
        Contents(),
        dict(assigner=EventTimeSessionWindows.with_gap(15), trigger=CountTrigger.of(3), function_kind="process"),
    ),
    "session-aggregate": (CountAndSum(), dict(assigner=EventTimeSessionWindows.with_gap(10), function_kind="aggregate")),
    "count-evictor": (
        Contents(),
        dict(
            assigner=GlobalWindows.create(),
            trigger=PurgingTrigger.of(CountTrigger.of(4)),
            evictor=CountEvictor.of(2),
            function_kind="process",
        ),
    ),
    "count-tumbling": (add_counts, dict(assigner=CountTumblingWindowAssigner.of(5), function_kind="reduce")),
    "processing-time": (Contents(), dict(assigner=TumblingProcessingTimeWindows.of(30), function_kind="process")),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("job", list(WINDOW_JOBS))
def test_window_operator(tmp_path, job, cache):
    function, params = WINDOW_JOBS[job]
    _assert_same_on_both(tmp_path, WindowOperator, function, _stream(11), cache, **params)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "function, params",
    [
        (add_counts, dict(assigner=TumblingEventTimeWindows.of(50), function_kind="reduce", allowed_lateness=25)),
        (CountAndSum(), dict(assigner=SlidingEventTimeWindows.of(60, 20), function_kind="aggregate")),
    ],
)
def test_aligned_window_operator(tmp_path, function, params, cache):
    # The factory's choice: accumulators by window start on the heap, in the backend's table on disk.
    heap = _assert_same_on_both(
        tmp_path, AlignedWindowOperator, function, _stream(13), cache, StateTableAlignedWindowOperator, **params
    )
    assert heap[1]  # some data was late


class Sessionize(KeyedProcessFunction):
    """Keeps a dict per key in value state and changes it in place, without update(), plus list and map state."""

    def open(self, runtime_context):
        self.profile = runtime_context.get_state(ValueStateDescriptor("profile"))
        self.history = runtime_context.get_list_state(ListStateDescriptor("history"))
        self.by_value = runtime_context.get_map_state(MapStateDescriptor("by-value"))

    def process_element(self, value, ctx):
        p = self.profile.value()
        if p is None:
            p = {"n": 0, "values": []}
            self.profile.update(p)
        p["n"] += 1
        p["values"].append(value[1])
        self.history.add(value[1])
        self.by_value.put(value[1], (self.by_value.get(value[1]) or 0) + 1)
        if p["n"] % 5 == 0:
            yield (ctx.get_current_key(), p["n"], sum(self.history.get()), sorted(self.by_value.items()))


@pytest.mark.parametrize("cache", CACHES)
def test_keyed_process_operator(tmp_path, cache):
    steps = [(batch, None) for batch, _ in _stream(17, timestamps=False)]
    _assert_same_on_both(tmp_path, KeyedProcessOperator, Sessionize(), steps, cache)


def test_a_deltas_records_are_handed_over_by_key_group_with_or_without_numpy(monkeypatch) -> None:
    """The writer groups a delta's records by their key-group prefix in numpy; the scalar way (a bare
    Python without numpy) hands over the same records, and both in key-group order."""
    import random

    from millstream.engine.runtime.state import lmdb_backend

    rng = random.Random(7)
    changed = {
        name: {rng.randrange(300).to_bytes(2, "big") + rng.randbytes(rng.randrange(1, 12)): rng.choice([None, b"\x80v"]) for _ in range(5_000)}
        for name in ("a", "b")
    }
    changed = {"empty": {}, **changed}  # a table with no changes comes first: the others keep their own records
    monkeypatch.setattr(lmdb_backend, "_GROUP_BLOCK", 1_000)  # several blocks
    grouped = list(lmdb_backend._changed_groups(changed))
    monkeypatch.setattr(lmdb_backend, "np", None)
    scalar = list(lmdb_backend._changed_groups(changed))
    assert [kg for kg, _ in grouped] == [kg for kg, _ in scalar] == sorted({int.from_bytes(lk[:2], "big") for t in changed.values() for lk in t})
    for (kg, tables), (_, other) in zip(grouped, scalar):
        assert {n: sorted(r) for n, r in tables.items()} == {n: sorted(r) for n, r in other.items()}
        assert all(int.from_bytes(lk[:2], "big") == kg for rows in tables.values() for lk, _ in rows)
    assert sum(len(r) for _, t in grouped for r in t.values()) == sum(map(len, changed.values()))


@pytest.mark.parametrize("spec", [None, "STRING", "LONG"])
def test_a_batchs_keys_encoded_ahead_are_the_keys_encoded_one_by_one(tmp_path, spec) -> None:
    """``prepare_keys`` (a reduce's batch) encodes str and int keys with the batch key-group hash: the
    same LMDB keys as ``_encode`` makes one at a time, a key too long for LMDB still as its digest, and
    a bool or float equal to a prepared int still as itself (its own, wrapped entry)."""
    keys = ["user-1", "é€😀", "", 0, 1, -5, 2**63 - 1, 2**64 + 3, "x" * 600]
    with LmdbKeyedStateBackend(128, tmp_path / "one", key_spec=spec) as one, LmdbKeyedStateBackend(128, tmp_path / "ahead", key_spec=spec) as ahead:
        ahead.prepare_keys(keys)
        assert ahead._prepared  # the batch was taken
        for k in keys:
            one._last_key = ahead._last_key = None
            assert ahead._encode(k) == one._encode(k), k
        for k in (True, 1.0):
            ahead._last_key = one._last_key = None
            assert ahead._encode(k) == one._encode(k) and ahead._encode(k)[1]  # wrapped: not the int's entry
        ahead.prepare_keys(["a", (1, 2)])  # not every key a str or an int: nothing is prepared
        assert ahead._prepared == {}
        table = ahead.table("counts", "value")
        ahead.prepare_keys(["user-1", 7])
        table["user-1"], table[7] = 1, 2
        ahead.flush()
        assert dict(table.items()) == {"user-1": 1, 7: 2}
