"""Key-grouped state files (issue 16): an operator's keyed state is written one part per key group, and
a restore reads only the head and the parts of the key groups it owns. Real files, real sealing, real
forked snapshots and real LMDB; restores onto either backend at any parallelism equal the state taken."""
from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millstream.engine.checkpoint import state_file
from millstream.engine.checkpoint import storage as storage_module
from millstream.engine.checkpoint.rescale import OperatorRestore
from millstream.engine.checkpoint.state_origin import StateOrigin
from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage, InvalidSavepoint
from millstream.engine.runtime import forked_snapshot
from millstream.engine.runtime.key_groups import assign_key_to_operator, key_group_range
from millstream.engine.runtime.state.key_grouped_state import decode_state, encode_state
from millstream.engine.runtime.state.state_records import key_group_prefix
from millstream.engine.runtime.state.task_state_manager import restore_keyed, snapshot_keyed_async, snapshot_keyed_tables

from tests.engine.runtime.state.test_properties_snapshots import MAX_P, Subtask, _backend, _Operator, subtasks_holding

JOB = "ab" * 16
SECRET = "s" * 32
ORIGIN = StateOrigin(JOB, 1)  # what _write's files belong to: checkpoint 1 of JOB


def _write(tmp: str, state: dict, subtask: int = 0) -> str:
    s = FileSystemCheckpointStorage(tmp)
    handle = s.write_task_state(JOB, 1, ("v", subtask), "op", encode_state(state))
    with open(os.path.join(os.path.dirname(handle), "_metadata"), "w") as f:
        f.write("{}")  # a completed checkpoint: the only kind a state handle may be read from
    return handle


STATES = st.fixed_dictionaries(
    {
        "keyed": st.dictionaries(
            st.integers(0, MAX_P - 1),
            st.dictionaries(st.sampled_from(["v", "_timers/t"]), st.lists(st.tuples(st.integers(), st.text(max_size=3)), max_size=3), min_size=1),
            max_size=6,
        ),
        "records": st.dictionaries(
            st.sampled_from(["r", "s"]),
            st.lists(st.tuples(st.integers(0, MAX_P - 1), st.binary(max_size=4), st.binary(max_size=4)), max_size=8),
        ),
        "operator": st.none() | st.lists(st.integers(), max_size=3),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=STATES, sealed=st.booleans(), lo=st.integers(0, MAX_P), width=st.integers(0, MAX_P))
def test_a_partial_read_gives_exactly_the_key_groups_asked_for(tmp_path_factory, monkeypatch, state, sealed, lo, width) -> None:
    records = {
        name: sorted({key_group_prefix(kg) + k: v for kg, k, v in rows}.items())
        for name, rows in state["records"].items()
    }
    state = {**state, "records": records, "kinds": {"v": "value"}}
    with monkeypatch.context() as m:
        if sealed:
            m.setitem(storage_module._sealing, "secret", SECRET)
        handle = _write(str(tmp_path_factory.mktemp("chk")), state)
        wanted = range(lo, min(lo + width, MAX_P))
        got = decode_state(FileSystemCheckpointStorage.read_state_file_key_groups(handle, wanted, ORIGIN))
        whole = decode_state(FileSystemCheckpointStorage.read_state_file(handle, ORIGIN))
    assert got["operator"] == state["operator"] and got["kinds"] == {"v": "value"}
    assert got.get("keyed", {}) == {kg: g for kg, g in state["keyed"].items() if kg in wanted}
    expect = {n: [r for r in rows if int.from_bytes(r[0][:2], "big") in wanted] for n, rows in records.items()}
    assert _nonempty(got.get("records")) == _nonempty(expect)
    assert whole.get("keyed", {}) == state["keyed"]
    assert _nonempty(whole.get("records")) == _nonempty(records)


def _nonempty(tables: dict | None) -> dict:
    return {n: rows for n, rows in (tables or {}).items() if rows}


def test_a_partial_read_never_reads_the_parts_of_other_key_groups(tmp_path, monkeypatch) -> None:
    """Damage every part outside the range read: a sealed file still restores those key groups, and a
    whole read refuses it (so the damage would have been seen had those parts been read)."""
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    keyed = {kg: {"v": [(kg, "x" * 50)]} for kg in range(MAX_P)}
    handle = _write(str(tmp_path), {"keyed": keyed, "kinds": {"v": "value"}})
    with open(handle, "rb") as f:
        data = bytearray(f.read())
    n = state_file.head_length(bytes(data[: state_file.PREFIX_BYTES]))
    _, index = state_file.decode_head(storage_module._open(storage_module._file_context(ORIGIN, os.path.basename(handle), "head"), bytes(data[state_file.PREFIX_BYTES : state_file.PREFIX_BYTES + n]), handle))
    mine = range(4, 8)
    for kg, off, length in index:
        if kg not in mine:
            data[state_file.PREFIX_BYTES + n + off + length - 1] ^= 0xFF
    with open(handle, "wb") as f:
        f.write(bytes(data))
    got = decode_state(FileSystemCheckpointStorage.read_state_file_key_groups(handle, mine, ORIGIN))
    assert got["keyed"] == {kg: keyed[kg] for kg in mine}
    with pytest.raises(InvalidSavepoint):
        FileSystemCheckpointStorage.read_state_file(handle, ORIGIN)


def test_state_without_keyed_parts_stays_a_plain_pickle_and_old_files_still_read(tmp_path) -> None:
    assert not state_file.is_key_grouped(encode_state({"operator": [1, 2]}))
    handle = _write(str(tmp_path), {"operator": [1, 2], "keyed": {}})
    assert decode_state(FileSystemCheckpointStorage.read_state_file_key_groups(handle, range(0, 3), ORIGIN)) == {"operator": [1, 2], "keyed": {}}


def test_an_incremental_chain_is_compressed_in_the_head_and_reads_back_the_same(tmp_path) -> None:
    """A rolled chain lists ~200 files in every checkpoint's state file; their names share most of
    their characters. Compressed, the head costs a tenth; read back, by a whole or a partial read,
    it is the same list, and a file written before (the chain as a plain list) still reads."""
    import pickle
    import uuid

    chain = [
        {"name": f"{'c' * 32}-3-1-0-{cid}-{uuid.uuid4().hex[:8]}.delta", "kind": "delta", "size": 140_000 + cid,
         "footer": [139_000, 700], "entries": 5000, "grouped": True}
        for cid in range(200)
    ]
    for state in ({"operator": [], "heap_chain": chain}, {"operator": [], "chain": chain, "keyed": {5: {"t": [(1, 2)]}}}):
        data = encode_state(state)
        assert len(data) < len(pickle.dumps(chain)) // 4
        back = decode_state(data)
        assert {k: back[k] for k in state if k != "keyed"} == {k: state[k] for k in state if k != "keyed"}
        handle = _write(str(tmp_path / str(len(state))), state)
        read = decode_state(FileSystemCheckpointStorage.read_state_file_key_groups(handle, range(0, 3), ORIGIN))
        assert read.get("chain", read.get("heap_chain")) == chain
    assert decode_state(pickle.dumps({"operator": [], "heap_chain": chain})) == {"operator": [], "heap_chain": chain}


def _snapshot(backend: Any) -> dict:
    """A savepoint's snapshot, by the backend's real path (a forked child grouping by key group; LMDB's
    read transaction)."""
    if getattr(backend, "snapshot_in_fork", False):
        return forked_snapshot.ForkedSnapshot.start(lambda: snapshot_keyed_tables(backend, _Operator(), True)).result()
    return snapshot_keyed_async(backend, _Operator())()


@pytest.mark.skipif(not forked_snapshot.available(), reason="needs os.fork")
@pytest.mark.parametrize("source", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("target", ["hashmap", "rocksdb"])
@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1)])
def test_a_rescaled_restore_from_files_reads_its_key_groups_and_restores_every_key_once(
    tmp_path, monkeypatch, source, target, before, after
) -> None:
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    keys = list(range(200)) + [f"k{i}" for i in range(60)]
    olds = subtasks_holding(keys, source, str(tmp_path), before)
    handles = {}
    for i, s in enumerate(olds):
        state = _snapshot(s.backend)
        assert "tables" not in state  # grouped: nothing whole left in the head
        handles[i] = _write(str(tmp_path / "chk"), state, i)
        getattr(s.backend, "close", lambda: None)()
    read: list[tuple[str, range]] = []
    real = FileSystemCheckpointStorage.read_state_file_key_groups

    def spy(handle: str, key_groups: range) -> bytes:
        read.append((handle, key_groups))
        return real(handle, key_groups, ORIGIN)

    got: dict[Any, tuple] = {}
    for j in range(after):
        spec = OperatorRestore("op", j, after, before, MAX_P, handles)
        read.clear()
        loaded = {i: decode_state(spy(h, spec.key_groups)) for i, h in handles.items()}
        assert {r for _, r in read} == {key_group_range(MAX_P, after, j)}
        owned = set(spec.key_groups)
        for st_ in loaded.values():
            assert set(st_.get("keyed", {})) <= owned  # nothing of another subtask's key groups came in
        s = Subtask(_backend(target, str(tmp_path)))
        restore_keyed(s.backend, _Operator(), loaded, spec)
        values, lists = s.state()
        for key in values:
            assert assign_key_to_operator(key, MAX_P, after) == j and key not in got
            got[key] = (values[key], lists[key])
        getattr(s.backend, "close", lambda: None)()
    assert got == {key: (hash(str(key)), [key]) for key in keys}
