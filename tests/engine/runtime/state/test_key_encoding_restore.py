"""Restoring keyed state taken under key encoding 1 (before equal keys shared a key group) or 2
(before keys were grouped as PyFlink groups them): every key is regrouped from every old subtask's
state file, at the same or another parallelism, by its declared key type; state of the current
encoding is restored by key group, from the subtask's own file only."""
from __future__ import annotations

import dataclasses
import pickle
import zlib
from types import SimpleNamespace
from typing import Any

import pytest

from millstream.engine.checkpoint.rescale import OperatorRestore, StateRestoreError
from millstream.engine.runtime.key_groups import KEY_ENCODING_VERSION, assign_key_to_operator
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.task_state_manager import KEY_ENCODING_FIELD, key_encoding_of, restore_keyed, snapshot_keyed
from tests.engine.runtime.test_key_encoding import _v1_key_bytes

MAX_P = 32


@dataclasses.dataclass(frozen=True)
class Tile:
    x: int
    y: int


# Keys whose key group changed with encoding 2, and some that kept theirs.
STATE = {True: 1, 2.0: 2, frozenset({"a", "b"}): 3, Tile(1, 2): 4, ("t", False): 5, "s": 6, 7: 7, ("u", 8): 8}
STATE.update({f"k{i}": 100 + i for i in range(20)})


class _Operator:
    """What restore_keyed asks of an operator: its timer services and its name."""

    ctx = SimpleNamespace(operator_name="counts")

    def timer_services(self) -> dict:
        return {}

    def keyed_tables(self) -> dict:
        return {}


def _write_v1_files(tmp_path, parallelism: int) -> dict[int, str]:
    """State files as a task of encoding 1 wrote them: keys grouped by the old bytes, no version."""
    files: dict[int, dict[str, Any]] = {i: {"keyed": {}, "kinds": {"count": "value"}} for i in range(parallelism)}
    for key, value in STATE.items():
        kg = zlib.crc32(_v1_key_bytes(key)) % MAX_P
        files[kg * parallelism // MAX_P]["keyed"].setdefault(kg, {}).setdefault("count", []).append((key, value))
    paths = {}
    for i, content in files.items():
        path = _completed_chk(tmp_path) / f"op-{i}.state"
        path.write_bytes(pickle.dumps(content))
        paths[i] = str(path)
    return paths


def _completed_chk(tmp_path):
    """A completed checkpoint directory: TaskManagers read state files only from one (issue 14)."""
    d = tmp_path / "chk-1"
    d.mkdir(exist_ok=True)
    (d / "_metadata").write_text("{}")
    return d


def _restore(paths: dict[int, str], subtask: int, parallelism: int, old_parallelism: int, read_peer=None) -> dict:
    same = parallelism == old_parallelism
    spec = OperatorRestore(
        "counts", subtask, parallelism, old_parallelism, MAX_P,
        {j: h for j, h in paths.items() if not same or j == subtask}, {}, dict(paths) if same else {},
    )
    loaded = {j: pickle.loads(open(h, "rb").read()) for j, h in spec.handles.items()}
    backend = HeapKeyedStateBackend(MAX_P)
    restore_keyed(backend, _Operator(), loaded, spec, read_peer)
    return dict(backend.tables.get("count", {}))


@pytest.mark.parametrize(("old_p", "new_p"), [(2, 2), (3, 3), (2, 3), (3, 1), (1, 4)])
def test_state_of_key_encoding_1_is_regrouped_on_restore(tmp_path, old_p, new_p):
    paths = _write_v1_files(tmp_path, old_p)
    restored: dict = {}
    for i in range(new_p):
        mine = _restore(paths, i, new_p, old_p)
        assert all(assign_key_to_operator(k, MAX_P, new_p) == i for k in mine), (i, mine)
        assert not set(mine) & set(restored), "a key was restored twice"
        restored.update(mine)
    assert restored == STATE


def test_regrouping_at_an_unchanged_parallelism_reads_the_other_subtasks_files(tmp_path):
    paths = _write_v1_files(tmp_path, 2)
    read: list[str] = []

    def read_peer(handle: str) -> dict:
        read.append(handle)
        return pickle.loads(open(handle, "rb").read())

    _restore(paths, 0, 2, 2, read_peer)
    assert read == [paths[1]]


def _write_v2_files(tmp_path, parallelism: int) -> dict[int, str]:
    """State files of key encoding 2: keys in other key groups than now, the version recorded."""
    files: dict[int, dict[str, Any]] = {
        i: {"keyed": {}, "kinds": {"count": "value", KEY_ENCODING_FIELD: "2"}} for i in range(parallelism)
    }
    for key, value in STATE.items():
        kg = zlib.crc32(repr(sorted(map(repr, key)) if isinstance(key, frozenset) else key).encode()) % MAX_P
        files[kg * parallelism // MAX_P]["keyed"].setdefault(kg, {}).setdefault("count", []).append((key, value))
    paths = {}
    for i, content in files.items():
        path = _completed_chk(tmp_path) / f"op2-{i}.state"
        path.write_bytes(pickle.dumps(content))
        paths[i] = str(path)
    return paths


@pytest.mark.parametrize("key_spec", [None, "STRING"])
@pytest.mark.parametrize(("old_p", "new_p"), [(2, 2), (2, 3), (3, 1)])
def test_state_of_key_encoding_2_is_regrouped_by_the_key_type(tmp_path, old_p, new_p, key_spec):
    paths = _write_v2_files(tmp_path, old_p)
    restored: dict = {}
    for i in range(new_p):
        same = new_p == old_p
        spec = OperatorRestore(
            "counts", i, new_p, old_p, MAX_P,
            {j: h for j, h in paths.items() if not same or j == i}, {}, dict(paths) if same else {},
        )
        loaded = {j: pickle.loads(open(h, "rb").read()) for j, h in spec.handles.items()}
        backend = HeapKeyedStateBackend(MAX_P, key_spec=key_spec)
        restore_keyed(backend, _Operator(), loaded, spec)
        mine = dict(backend.tables.get("count", {}))
        assert all(assign_key_to_operator(k, MAX_P, new_p, key_spec) == i for k in mine), (i, mine)
        assert not set(mine) & set(restored), "a key was restored twice"
        restored.update(mine)
    assert restored == STATE


def test_state_of_the_current_key_encoding_is_restored_from_its_own_file_only(tmp_path):
    backend = HeapKeyedStateBackend(MAX_P)
    table = backend.table("count", "value")
    for key, value in STATE.items():
        if assign_key_to_operator(key, MAX_P, 2) == 0:
            table[key] = value
    keyed, kinds = snapshot_keyed(backend, _Operator())
    assert key_encoding_of({"kinds": kinds}) == KEY_ENCODING_VERSION and kinds[KEY_ENCODING_FIELD] == "3"
    spec = OperatorRestore("counts", 0, 2, 2, MAX_P, {0: "own"}, {}, {0: "own", 1: "peer"})

    def read_peer(handle: str) -> dict:
        raise AssertionError("the current encoding needs no other subtask's file")

    fresh = HeapKeyedStateBackend(MAX_P)
    restore_keyed(fresh, _Operator(), {0: {"keyed": keyed, "kinds": kinds}}, spec, read_peer)
    assert fresh.tables["count"] == table
    assert KEY_ENCODING_FIELD not in fresh.kinds  # the marker is not a state


def test_equal_keys_that_encoding_1_kept_apart_are_refused_not_merged(tmp_path):
    files = {}
    for i, key in enumerate([1, True]):
        kg = zlib.crc32(_v1_key_bytes(key)) % MAX_P
        path = _completed_chk(tmp_path) / f"op-{i}.state"
        path.write_bytes(pickle.dumps({"keyed": {kg: {"count": [(key, 10 + i)]}}, "kinds": {"count": "value"}}))
        files[i] = str(path)
    with pytest.raises(StateRestoreError, match="one key since key encoding 2"):
        for i in range(2):
            _restore(files, i, 2, 2)
