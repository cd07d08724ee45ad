"""Property: random updates, deletes and in-place list appends, with snapshots taken at random points
(each by its backend's real asynchronous path: a forked child for the heap backend, a read transaction
read after later writes for the on-disk one) and restores at random points onto either backend at any
parallelism, always give the state a plain dict holds at the snapshot."""
from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millstream.engine.checkpoint.rescale import OperatorRestore
from millstream.engine.datastream.state import ListStateDescriptor, ValueStateDescriptor
from millstream.engine.runtime import forked_snapshot
from millstream.engine.runtime.key_groups import assign_key_to_operator
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.runtime.state.task_state_manager import restore_keyed, snapshot_keyed_async, snapshot_keyed_tables

MAX_P = 16
KEYS = st.one_of(st.integers(-5, 40), st.sampled_from(["a", "b", "long-" + "x" * 600, ("t", 1)]))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, st.integers()),
        st.tuples(st.just("delete"), KEYS),
        st.tuples(st.just("append"), KEYS, st.integers(0, 9)),
        st.tuples(st.just("snapshot")),
        st.tuples(st.just("restore"), st.sampled_from(["hashmap", "rocksdb"]), st.integers(1, 3)),
    ),
    max_size=40,
)
_dirs = itertools.count()


class _Operator:
    """What snapshot/restore ask of an operator, with no timers or tables of its own."""

    ctx = SimpleNamespace(operator_name="op")

    def timer_services(self) -> dict:
        return {}

    def keyed_tables(self) -> dict:
        return {}


def _backend(kind: str, tmp: str) -> Any:
    if kind == "hashmap":
        return HeapKeyedStateBackend(MAX_P)
    return LmdbKeyedStateBackend(MAX_P, f"{tmp}/lmdb-{next(_dirs)}", cache_entries=1)  # no cache to speak of: writes reach LMDB at once


class Subtask:
    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.value = backend.get_state(ValueStateDescriptor("v", None))
        self.list = backend.get_list_state(ListStateDescriptor("l", None))

    def state(self) -> tuple[dict, dict]:
        values, lists = {}, {}
        for key, v in self.backend.table("v", "value").items():
            values[key] = v
        for key, items in self.backend.table("l", "list").items():
            lists[key] = list(items)
        return values, lists


def _start_snapshot(backend: Any) -> Any:
    """Begin a snapshot the way a checkpoint does; the returned callable finishes it (later)."""
    if getattr(backend, "snapshot_in_fork", False):
        child = forked_snapshot.ForkedSnapshot.start(lambda: snapshot_keyed_tables(backend, _Operator()))

        return child.result
    return snapshot_keyed_async(backend, _Operator())


@pytest.mark.skipif(not forked_snapshot.available(), reason="needs os.fork")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.sampled_from(["hashmap", "rocksdb"]), ops=OPS)
def test_snapshots_and_restores_at_random_points_equal_a_plain_dict(tmp_path, first, ops) -> None:
    subtasks = [Subtask(_backend(first, str(tmp_path)))]  # one subtask owning every key group
    values: dict[Any, int] = {}
    lists: dict[Any, list[int]] = {}
    pending: list[tuple[Any, dict, dict]] = []  # (finish, values then, lists then), newest last
    try:
        for op in ops:
            if op[0] in ("put", "delete", "append"):
                key = op[1]
                owner = subtasks[assign_key_to_operator(key, MAX_P, len(subtasks))]
                owner.backend.current_key = key
                if op[0] == "put":
                    owner.value.update(op[2])
                    values[key] = op[2]
                elif op[0] == "delete":
                    owner.value.clear()
                    owner.list.clear()
                    values.pop(key, None)
                    lists.pop(key, None)
                else:
                    owner.list.add(op[2])
                    lists.setdefault(key, []).append(op[2])
            elif op[0] == "snapshot":
                started = [_start_snapshot(s.backend) for s in subtasks]
                pending.append((started, dict(values), {k: list(v) for k, v in lists.items()}))
            elif pending:  # restore the newest snapshot, finished only now, after later writes
                for older, _, _ in pending[:-1]:  # every snapshot finishes, as a checkpoint's does
                    for finish in older:
                        finish()
                started, values_then, lists_then = pending[-1]
                loaded = {}
                for i, finish in enumerate(started):
                    loaded[i] = finish()
                pending.clear()
                kind, parallelism = op[1], op[2]
                for s in subtasks:
                    getattr(s.backend, "close", lambda: None)()
                subtasks = []
                for j in range(parallelism):
                    s = Subtask(_backend(kind, str(tmp_path)))
                    spec = OperatorRestore("op", j, parallelism, len(loaded), MAX_P, {i: None for i in loaded})
                    restore_keyed(s.backend, _Operator(), loaded, spec)
                    subtasks.append(s)
                values, lists = values_then, lists_then
                got_values, got_lists = {}, {}
                for j, s in enumerate(subtasks):
                    v, l = s.state()
                    assert all(assign_key_to_operator(k, MAX_P, parallelism) == j for k in [*v, *l])
                    got_values.update(v)
                    got_lists.update(l)
                assert got_values == values
                assert got_lists == lists
        # Snapshots never finished here still finish (a child or a transaction is not left behind).
        for started, values_then, lists_then in pending:
            for finish in started:
                finish()
    finally:
        for s in subtasks:
            getattr(s.backend, "close", lambda: None)()


def subtasks_holding(keys: list, backend: str, directory: str, parallelism: int) -> list["Subtask"]:
    """``parallelism`` subtasks of ``backend``, each holding the keys whose key groups it owns (a value
    and a list entry per key)."""
    subtasks = [Subtask(_backend(backend, directory)) for _ in range(parallelism)]
    for key in keys:
        owner = subtasks[assign_key_to_operator(key, MAX_P, parallelism)]
        owner.backend.current_key = key
        owner.value.update(hash(str(key)))
        owner.list.add(key)
    return subtasks


@pytest.mark.parametrize("source", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("target", ["hashmap", "rocksdb"])
@pytest.mark.parametrize(("before", "after"), [(1, 3), (3, 2), (2, 1)])
def test_every_key_is_restored_once_by_the_subtask_owning_its_key_group(tmp_path, source, target, before, after) -> None:
    keys = list(range(300)) + [f"k{i}" for i in range(100)]
    olds = subtasks_holding(keys, source, str(tmp_path), before)
    loaded = {i: _start_snapshot(s.backend)() for i, s in enumerate(olds)}
    for s in olds:
        getattr(s.backend, "close", lambda: None)()
    got: dict[Any, tuple] = {}
    for j in range(after):
        s = Subtask(_backend(target, str(tmp_path)))
        restore_keyed(s.backend, _Operator(), loaded, OperatorRestore("op", j, after, before, MAX_P, {i: None for i in loaded}))
        values, lists = s.state()
        assert set(values) == set(lists)
        for key in values:
            assert assign_key_to_operator(key, MAX_P, after) == j and key not in got
            got[key] = (values[key], lists[key])
        getattr(s.backend, "close", lambda: None)()
    assert got == {key: (hash(str(key)), [key]) for key in keys}
