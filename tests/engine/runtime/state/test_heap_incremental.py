"""The heap backend's changelog (engine/runtime/state/heap_incremental.py): what a delta holds when the
task thread goes on changing state before the writer thread reads it, and what the tables look like
to a savepoint."""
from __future__ import annotations

from types import SimpleNamespace

import pickle
import threading

import pytest

from millstream.engine.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.heap_incremental import CHUNK, TrackedTable
from millstream.engine.runtime.state.heap_state_files import frames, replay_tables
from millstream.engine.runtime.state.state_chain import replay_reads
from millstream.engine.runtime.state.state_chain import BASE, DELTA, SharedFile



class Op:
    """An operator with no timers and no keyed tables of its own, as the snapshot helpers see it."""

    ctx = SimpleNamespace(operator_name="op")

    def timer_services(self) -> dict:
        return {}

    def keyed_tables(self) -> dict:
        return {}

def _files() -> tuple[dict[str, list[tuple[int, bytes]]], callable]:
    store: dict[str, list[tuple[int, bytes]]] = {}

    def write(name: str, kind: str, parts: list[tuple[int, bytes]]) -> SharedFile:
        store[name] = parts
        return SharedFile(name, kind, sum(len(p) for _, p in parts), tuple((i, 0, len(p)) for i, p in parts))

    return store, write


def _base(backend: HeapKeyedStateBackend, cid: int, write, first: bool = False) -> tuple:
    """A checkpoint that starts a chain: a base, or (``first``: the backend's first checkpoint, its
    tables tracked since they were empty) a delta on the empty chain."""
    plan, read = backend.begin_incremental_snapshot(cid)
    from millstream.engine.runtime.state.heap_state_files import base_parts

    if first:
        assert not plan.is_base and plan.parent == () and read is not None
        chain = (write(f"d{cid}", DELTA, read()),)
        backend.changes.written(cid, chain)
        backend.notify_checkpoint_complete(cid)
        return chain
    assert plan.is_base and read is None
    chain = (write(f"b{cid}", BASE, base_parts(backend.tables)),)
    backend.changes.written(cid, chain)
    backend.notify_checkpoint_complete(cid)
    return chain


def test_a_delta_holds_the_values_of_its_barrier_whatever_the_task_does_before_it_is_read() -> None:
    b = HeapKeyedStateBackend(128, incremental=True)
    value = b.get_state(ValueStateDescriptor("v", None))
    items = b.get_list_state(ListStateDescriptor("l", None))
    m = b.get_map_state(MapStateDescriptor("m", None, None))
    store, write = _files()
    for k in range(10):
        b.current_key = k
        value.update(k)
        items.add(k)
    chain = _base(b, 1, write, first=True)
    for k in range(5):  # changed before checkpoint 2's barrier
        b.current_key = k
        value.update(100 + k)
        items.add(100 + k)
        m.put("x", [k])
    b.current_key = 9
    value.clear()
    plan, read = b.begin_incremental_snapshot(2)
    assert not plan.is_base and plan.parent == chain
    for k in range(10):  # after the barrier, before the writer reads: none of this is in the delta
        b.current_key = k
        value.update(999)
        items.add(999)
        m.get("x").append(999) if m.get("x") is not None else m.put("x", [999])
    b.current_key = 4
    value.clear()
    delta = write("d2", DELTA, read())
    tables = replay_tables((*chain, delta), lambda name, index: store[name])
    assert tables["v"] == {**{k: 100 + k for k in range(5)}, **{k: k for k in range(5, 9)}}
    assert tables["l"] == {**{k: [k, 100 + k] for k in range(5)}, **{k: [k] for k in range(5, 10)}}
    assert tables["m"] == {k: {"x": [k]} for k in range(5)}
    # and the live state went on
    b.current_key = 3
    assert value.value() == 999 and list(items.get())[-1] == 999


@pytest.mark.parametrize("batched", [False, True], ids=["key-by-key", "batch_access"])
@pytest.mark.parametrize(
    ("slow", "values"),
    [("ungrouped", "lists"), ("_refs_part", "lists"), ("group_by_key_group", "lists"), ("columns", "numbers"), ("_refs_part", "numbers")],
)
def test_the_task_thread_changing_keys_while_the_writer_reads_them_in_chunks(monkeypatch, slow, values, batched) -> None:
    """The writer slowed while the task thread changes the keys it is writing: ``ungrouped``: the
    ungrouped writer under the lock (``_chunk_part``); ``_refs_part``: the grouped writer under the lock before it
    pickles (each run of a key group); ``group_by_key_group``: between looking a slice's values up
    and taking the lock; ``columns``: while it copies numbers into columns, before the lock.
    ``lists``: values the task changes in place after the barrier (a hand-out, then ``append``);
    ``numbers``: tuples it replaces. ``batched``: the task writes as the reduce does, a batch at a
    time through ``batch_access`` with the batch's keys. Every key's barrier value must survive."""
    import time

    from millstream.engine.runtime.state import heap_incremental, state_columns

    where = state_columns if slow == "columns" else heap_incremental
    name = "_chunk_part" if slow == "ungrouped" else slow
    part = getattr(where, name)

    def slow_part(*args, **kw):  # a slow writer: the task's changes overlap every chunk
        time.sleep({"ungrouped": 0.05, "_refs_part": 0.002}.get(slow, 0.01))
        return part(*args, **kw)

    monkeypatch.setattr(where, name, slow_part)
    b = HeapKeyedStateBackend(128, incremental=True)
    if slow == "ungrouped":  # the older, ungrouped files
        monkeypatch.setattr("millstream.engine.runtime.state.heap_backend.key_grouper", lambda *a: None)
    t = b.table("_reduce", "value")
    store, write = _files()
    chain = _base(b, 1, write, first=True)
    n = 5 * CHUNK
    first = (lambda k: [k, 1]) if values == "lists" else (lambda k: (k, 1))
    for k in range(n):
        t[k] = first(k)
    plan, read = b.begin_incremental_snapshot(2)
    out: list = []
    reader = threading.Thread(target=lambda: out.append(read()))
    reader.start()
    time.sleep(0.01)

    def changed(cur, k):
        if cur is None:
            return first(k)
        if values == "lists":
            cur.append(2)  # in place: the barrier's object
            return cur
        return (k, cur[1] + 1)

    if batched:
        for lo in range(0, n, 500):  # races the writer: every key's barrier value must survive
            keys = [*range(lo, lo + 500), *range(n + lo, n + lo + 500)]
            get, put, record = heap_incremental.batch_access(t, keys)
            for k in keys:
                put(k, changed(get(k), k))
            record(keys)
    else:
        for k in range(n):  # races the writer: every key's barrier value must survive
            t[k] = changed(t.get(k), k)
            t[n + k] = first(n + k)
    reader.join()
    assert len(t) == 2 * n and t[n - 1] == changed(first(n - 1), n - 1)
    delta = write("d2", DELTA, out[0])
    assert replay_tables((*chain, delta), lambda name, index: store[name]) == {"_reduce": {k: first(k) for k in range(n)}}


def test_tables_pickle_as_plain_dicts_and_a_cleared_table_makes_the_next_checkpoint_a_base() -> None:
    b = HeapKeyedStateBackend(128, incremental=True)
    t = b.table("v", "value")
    assert isinstance(t, TrackedTable)
    t[1] = 2
    copy = pickle.loads(pickle.dumps(t))
    assert type(copy) is dict and copy == {1: 2}
    _, write = _files()
    _base(b, 1, write, first=True)
    t[2] = 3
    plan, read = b.begin_incremental_snapshot(2)
    assert not plan.is_base
    read()
    t.clear()
    plan, _ = b.begin_incremental_snapshot(3)
    assert plan.is_base


def test_resume_makes_the_next_checkpoint_a_delta_on_the_restored_chain() -> None:
    b = HeapKeyedStateBackend(128, incremental=True)
    _, write = _files()
    chain = (write("b1", BASE, []),)
    b.table("v", "value").update({1: 1, 2: 2})  # as a restore puts state back
    b.resume_incremental(chain)
    b.table("v", "value")[3] = 3
    plan, read = b.begin_incremental_snapshot(5)
    assert not plan.is_base and plan.parent == chain
    (_, payload), = read()
    assert list(frames(payload)) == [("v", {3: 3}, [])]  # only what changed after the restore


def test_a_delta_never_read_stops_taxing_writes_once_its_checkpoint_is_aborted_or_a_later_one_completed() -> None:
    b = HeapKeyedStateBackend(128, incremental=True)
    t = b.table("v", "value")
    _, write = _files()
    _base(b, 1, write, first=True)
    t[1] = 1
    b.begin_incremental_snapshot(2)  # declined before its writer ran: never read
    assert t.cow is not None
    b.notify_checkpoint_aborted(2)
    assert t.cow is None
    _base(b, 3, write)  # an aborted checkpoint makes the next a base
    t[1] = 2
    b.begin_incremental_snapshot(4)  # never read either
    t[1] = 3
    plan, read5 = b.begin_incremental_snapshot(5)
    b.changes.written(5, (*plan.parent, write("d5", DELTA, read5())))
    b.notify_checkpoint_complete(5)  # the writer ran in order: 4's views are dropped with it
    assert t.cow is None


def test_a_due_base_is_compacted_from_the_chain_files_without_a_fork(tmp_path) -> None:
    """Issue 16, heap targets: with a reader of the job's shared files no checkpoint is a (forked) base:
    the first is a delta on the empty chain, and when a base is due the writer compacts the last
    completed chain into one from its files; every chain replays to the state at its barrier."""
    from types import SimpleNamespace

    from millstream.engine.checkpoint.storage import read_shared_file, write_shared_file
    from millstream.engine.runtime.state.task_state_manager import snapshot_heap_incremental

    shared = str(tmp_path / "shared")

    def write(cid: int):
        def w(kind: str, parts: list) -> SharedFile:
            name = f"op-0-{cid}.{kind}"
            size, index = write_shared_file(shared, name, parts, "job")
            return SharedFile(name, kind, size, tuple(index))

        return w

    def read(name: str, index: list) -> list:
        return read_shared_file(shared, name, index, "job")

    b = HeapKeyedStateBackend(128, incremental=True)
    b.changes.max_deltas = 2  # type: ignore[union-attr]
    value = b.get_state(ValueStateDescriptor("v", None))
    kinds = []
    for cid in range(1, 8):
        for k in range(cid * 3):
            b.current_key = k
            value.update(cid * 100 + k)
        expected = dict(b.tables["v"])
        complete = snapshot_heap_incremental(b, Op(), cid, write(cid), read)
        b.current_key = 0
        value.update(-1)  # after the barrier: not in this checkpoint
        out = complete()
        chain = tuple(SharedFile.from_wire(f) for f in out["heap_chain"])
        kinds.append(tuple(f.kind for f in chain))
        assert replay_tables(chain, read) == {"v": expected}
        b.notify_checkpoint_complete(cid)
    assert kinds[0] == (DELTA,)
    assert any(BASE in k for k in kinds)  # compacted (rolled: a partial base) at least once
    assert max(len(k) for k in kinds) <= 3  # every key rewritten each time: older files all dropped


def _compacting(tmp_path, max_deltas: int):
    """A heap backend with incremental checkpoints whose writer can read its chain back, the shared
    files on disk, and a function taking checkpoint ``cid``: (chain, bytes newly written, expected)."""
    from types import SimpleNamespace

    from millstream.engine.checkpoint.storage import read_shared_file, write_shared_file
    from millstream.engine.runtime.state.task_state_manager import snapshot_heap_incremental

    shared = str(tmp_path / "shared")

    def read(name: str, index: list) -> list:
        return read_shared_file(shared, name, index, "job")

    b = HeapKeyedStateBackend(128, incremental=True)
    b.changes.max_deltas = max_deltas  # type: ignore[union-attr]

    def checkpoint(cid: int) -> tuple:
        written = iter(range(10))

        def w(kind: str, parts: list) -> SharedFile:
            name = f"op-0-{cid}-{next(written)}.{kind}"
            size, index = write_shared_file(shared, name, parts, "job")
            return SharedFile(name, kind, size, tuple(index))

        expected = {n: dict(t) for n, t in b.tables.items() if t}
        complete = snapshot_heap_incremental(b, Op(), cid, w, read)
        out = complete()
        chain = tuple(SharedFile.from_wire(f) for f in out["heap_chain"])
        assert replay_tables(chain, read) == expected
        b.notify_checkpoint_complete(cid)
        return chain, out.get("_written", chain[-1].size)

    return b, checkpoint


def _replayed(chain: tuple) -> int:
    """Bytes a restore of every key group reads of ``chain``."""
    return sum(length for _, _, index in replay_reads(chain) for _, _, length in index)


def test_new_keys_make_each_checkpoint_write_about_twice_its_delta_and_restores_read_a_bounded_chain(tmp_path) -> None:
    """Issue 16's 3 M-key count adds a key per record. Rewriting the chain whenever the deltas
    outweighed the base did it every second or third checkpoint; merging the newest files rewrote
    each byte several times. Rolled compaction rebases a few key groups per checkpoint, paid for by
    the delta's bytes: the bytes written stay about twice the deltas', no checkpoint rewrites the
    state, and a restore reads at most about three times what is live."""
    b, checkpoint = _compacting(tmp_path, max_deltas=10)
    value = b.get_state(ValueStateDescriptor("v", None))
    deltas = written_all = 0
    for cid in range(1, 41):
        for k in range(cid * 1000, cid * 1000 + 1000):
            b.current_key = k
            value.update(k)
        chain, written = checkpoint(cid)
        delta = next(f for f in chain if f.kind == DELTA and f.name.startswith(f"op-0-{cid}-"))
        # the 1,000 keys' bytes: the delta file leaves out the parts of the key groups rebased with it
        changed = 1000 * delta.size / delta.entries
        deltas, written_all = deltas + changed, written_all + written
        assert written <= 3 * changed  # never the state: at most the delta and a few key groups
        assert _replayed(chain) <= 3.2 * cid * changed  # at most about three times what is live
    assert any(f.partial for f in chain)
    assert written_all <= 2.2 * deltas


def test_partial_bases_drop_old_files_and_keep_deletions(tmp_path) -> None:
    """A key group's partial base replaces its parts of every older file, deletions included (a key
    deleted after the first file stays deleted), and a file no key group reads any more leaves the
    chain: with a short ``rolled_cycle`` the first file goes although almost nothing changes."""
    b, checkpoint = _compacting(tmp_path, max_deltas=4)
    b.rolled.cycle = 4
    value = b.get_state(ValueStateDescriptor("v", None))
    for k in range(20_000):
        b.current_key = k
        value.update(k)
    first = checkpoint(1)[0][0]
    for cid in range(2, 12):
        b.current_key = cid
        value.clear()  # deletes a key of the first file
        b.current_key = 100_000 + cid
        value.update(cid)
        chain, written = checkpoint(cid)  # replays to the dict's state, deletions kept
    assert first not in chain and all(f.partial or f.kind == DELTA for f in chain)
    assert len(chain) <= 12


def test_overwrites_keep_the_chain_short_and_the_replay_bounded(tmp_path) -> None:
    """The same keys written every interval: each key group is rebased once its replay passes its base,
    so a restore never reads much more than the state and the chain stays short."""
    b, checkpoint = _compacting(tmp_path, max_deltas=100)
    value = b.get_state(ValueStateDescriptor("v", None))
    lengths = []
    rebased = set()
    for cid in range(1, 12):
        for k in range(1000):
            b.current_key = k
            value.update(cid * k)
        chain, _ = checkpoint(cid)  # (which restores exactly)
        lengths.append(len(chain))
        # Every key group changed: those a partial base of this checkpoint holds are left out of its
        # delta (the base follows it in the chain, so their parts would be written and never read).
        mine = [f for f in chain if f.name.startswith(f"op-0-{cid}-")]
        based = {kg for f in mine if f.partial for kg, _, _ in f.index}
        assert not based & {kg for f in mine if f.kind == DELTA for kg, _, _ in f.index}
        rebased |= based
        # the state's bytes (all 1,000 keys); the newest file may be a partial base of every key group
        newest = next(f for f in reversed(chain) if f.entries > 0)
        assert _replayed(chain) <= 3.2 * 1000 * newest.size / newest.entries
    assert max(lengths) <= 4
    assert len(rebased) == 128  # each key group was rebased in some checkpoint


def _heap_job(tmp_path, old: int, sealed: bool, monkeypatch):
    """``old`` heap subtasks with incremental checkpoints (grouped files, real sealed shared files in a
    job's checkpoint layout) through deltas, a merge and a new chain after a cleared table; returns (root,
    state dicts by subtask, handles by subtask, the values and lists a plain dict holds)."""
    import os
    from types import SimpleNamespace

    from millstream.engine.checkpoint import storage as storage_module
    from millstream.engine.checkpoint.storage import read_shared_file, write_shared_file
    from millstream.engine.runtime.key_groups import assign_key_to_operator
    from millstream.engine.runtime.state.task_state_manager import snapshot_heap_incremental

    if sealed:
        monkeypatch.setitem(storage_module._sealing, "secret", "s" * 32)

    root = tmp_path / "job"
    shared = str(root / "shared")
    backends = []
    for _ in range(old):
        b = HeapKeyedStateBackend(128, incremental=True)
        b.changes.max_deltas = 2  # type: ignore[union-attr]
        backends.append((b, b.get_state(ValueStateDescriptor("v", None)), b.get_list_state(ListStateDescriptor("l", None))))
    values: dict = {}
    lists: dict = {}
    keys = [*range(-40, 700), *(f"k{i}" for i in range(300))]
    states: dict[int, dict] = {}
    for cid in range(1, 7):
        if cid == 4:  # a cleared table: this checkpoint is a base, from the live tables
            for bk, _, _ in backends:
                bk.table("l", "list").clear()
            lists.clear()
        for n, k in enumerate(keys):
            if (n + cid) % 3 and cid != 1:
                continue
            b, v, lst = backends[assign_key_to_operator(k, 128, old)]
            b.current_key = k
            if (n * cid) % 17 == 5:
                v.clear()
                values.pop(k, None)
            else:
                v.update(cid * 1000 + n)
                values[k] = cid * 1000 + n
            if n % 4 == 0:
                lst.add(cid)
                lists.setdefault(k, []).append(cid)
        for i, (b, _, _) in enumerate(backends):
            written = iter(range(10))

            def w(kind: str, parts: list, i: int = i, cid: int = cid, written=written) -> SharedFile:
                name = f"op-{i}-{cid}-{next(written)}.{kind}"
                size, index = write_shared_file(shared, name, parts, "job")
                return SharedFile(name, kind, size, tuple(index))

            # checkpoint 4 starts a new chain: a delta of every key, on the writer thread
            reader = lambda name, index: read_shared_file(shared, name, index, "job")  # noqa: E731
            complete = snapshot_heap_incremental(b, Op(), cid, w, reader)
            states[i] = complete()
            if cid == 4:  # refers to nothing older
                assert all(f["name"].startswith(f"op-{i}-4-") for f in states[i]["heap_chain"])
            states[i].pop("_written", None)
            b.notify_checkpoint_complete(cid)
    handles = {}
    os.makedirs(root / "chk-6")
    open(root / "chk-6" / "_metadata", "wb").close()
    for i in range(old):
        handles[i] = str(root / "chk-6" / f"op-{i}.state")
        open(handles[i], "wb").close()
    kinds = {f["kind"] for st in states.values() for f in st["heap_chain"]}
    assert kinds == {BASE, DELTA} and all(f.get("grouped") for st in states.values() for f in st["heap_chain"])
    return root, states, handles, values, lists


def _damage_outside(root, states: dict, mine: range) -> int:
    """Flip the last byte of every part of a grouped shared file outside key groups ``mine``."""
    damaged = 0
    for st in states.values():
        for f in st["heap_chain"]:
            path = root / "shared" / f["name"]
            data = bytearray(path.read_bytes())
            for kg, off, length in f["index"]:
                if kg not in mine:
                    data[off + length - 1] ^= 0xFF
                    damaged += 1
            path.write_bytes(bytes(data))
    return damaged


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 1), (2, 2)])
def test_a_rescaled_restore_of_a_grouped_heap_chain_reads_only_its_key_groups(tmp_path, monkeypatch, old, new) -> None:
    """Change 8: with every part outside a new subtask's key groups damaged (sealed files), each new
    subtask still restores exactly its keys of the plain dict's state: nothing else was read. A whole
    read of the same files fails, so the damage would have been seen."""
    import shutil

    from millstream.engine.checkpoint.rescale import OperatorRestore
    from millstream.engine.checkpoint.state_origin import StateOrigin
    from millstream.engine.checkpoint.storage import InvalidSavepoint, read_shared_parts
    from millstream.engine.runtime.key_groups import assign_key_to_operator, key_group_range
    from millstream.engine.runtime.state.task_state_manager import restore_keyed

    class Op:
        def timer_services(self) -> dict:
            return {}

    root, states, handles, values, lists = _heap_job(tmp_path / "src", old, True, monkeypatch)
    origin = StateOrigin("job", 6)
    got_values: dict = {}
    got_lists: dict = {}
    for j in range(new):
        mine = key_group_range(128, new, j)
        copy = tmp_path / f"copy-{j}" / "job"
        shutil.copytree(root, copy)
        damaged = _damage_outside(copy, states, mine)
        assert damaged > 0 or new == 1
        moved = {i: str(copy / "chk-6" / f"op-{i}.state") for i in handles}
        asked: list = []

        def read_shared(o: int, name: str, ranges: list, moved: dict = moved, asked: list = asked) -> list:
            asked.extend(r[0] for r in ranges)
            return read_shared_parts(moved[o], name, ranges, origin)

        b = HeapKeyedStateBackend(128, incremental=True)
        spec = OperatorRestore("op", j, new, old, 128, dict(moved))
        restore_keyed(b, Op(), states, spec, read_shared=read_shared)
        assert asked and set(asked) <= set(mine)
        v = dict(b.tables.get("v") or {})
        lst = {k: list(x) for k, x in (b.tables.get("l") or {}).items()}
        assert all(assign_key_to_operator(k, 128, new) == j for k in [*v, *lst])
        got_values.update(v)
        got_lists.update(lst)
        if damaged:  # a file with a damaged part, read whole
            o, f = next((o, f) for o, st in states.items() for f in st["heap_chain"] if any(r[0] not in mine for r in f["index"]))
            with pytest.raises(InvalidSavepoint):
                read_shared_parts(moved[o], f["name"], [tuple(r) for r in f["index"]], origin)
    assert got_values == values and got_lists == lists


def test_heap_chains_of_the_older_format_still_restore_rescaled(tmp_path, monkeypatch) -> None:
    """A chain whose files do not say ``grouped`` (written before change 8: parts numbered in order) is
    read whole and its keys hashed, as before."""
    from millstream.engine.checkpoint.rescale import OperatorRestore
    from millstream.engine.checkpoint.storage import read_shared_parts
    from millstream.engine.runtime.key_groups import assign_key_to_operator
    from millstream.engine.runtime.state.heap_state_files import base_parts
    from millstream.engine.checkpoint.storage import write_shared_file
    from millstream.engine.runtime.state.task_state_manager import restore_keyed

    class Op:
        def timer_services(self) -> dict:
            return {}

    root = tmp_path / "job"
    (root / "chk-1").mkdir(parents=True)
    open(root / "chk-1" / "_metadata", "wb").close()
    handle = str(root / "chk-1" / "op-0.state")
    open(handle, "wb").close()
    table = {k: k * 2 for k in range(500)}
    parts = base_parts({"v": table})  # no key groups: the older, numbered format
    assert not parts.grouped
    size, index = write_shared_file(str(root / "shared"), "op-0-1.base", parts, "job")
    state = {"keyed": {}, "kinds": {"v": "value"}, "heap_chain": [SharedFile("op-0-1.base", BASE, size, tuple(index)).to_wire()]}
    got: dict = {}
    for j in range(3):
        b = HeapKeyedStateBackend(128, incremental=True)
        restore_keyed(b, Op(), {0: state}, OperatorRestore("op", j, 3, 1, 128, {0: handle}),
                      read_shared=lambda o, name, ranges: read_shared_parts(handle, name, ranges))
        v = dict(b.tables.get("v") or {})
        assert all(assign_key_to_operator(k, 128, 3) == j for k in v)
        got.update(v)
    assert got == table


def test_a_batch_written_through_batch_access_is_in_the_next_delta_with_its_barrier_values() -> None:
    """A reduce writes a tracked table through the dict's own methods while no snapshot is in flight,
    recording its keys after the batch; with a snapshot in flight, through the table's methods, so a
    key changed before the writer read it still goes out with its barrier value."""
    from millstream.engine.runtime.state.heap_incremental import batch_access

    b = HeapKeyedStateBackend(128, incremental=True)
    t = b.table("_reduce", "value")
    store, write = _files()
    get, put, record = batch_access(t)
    assert get == dict.get.__get__(t)  # the C methods: nothing recorded until ``record``
    keys = []
    for k in range(10):
        put(k, (k, 1))
        keys.append(k)
    assert not t.changed
    record(keys)
    assert t.changed == set(range(10))
    chain = _base(b, 1, write, first=True)
    assert replay_tables(chain, lambda name, index: store[name]) == {"_reduce": {k: (k, 1) for k in range(10)}}

    get, put, record = batch_access(t)  # one batch's: a barrier swaps the change set
    put(3, (3, 2))
    record([3])  # changed after checkpoint 1: in checkpoint 2 with this value
    plan, read = b.begin_incremental_snapshot(2)
    get, put, record = batch_access(t)  # a view is attached: each write saves the barrier value first
    put(3, (3, 3))  # after the barrier: must not reach checkpoint 2
    put(4, (4, 2))
    record([3, 4])
    delta = write("d2", DELTA, read())
    assert replay_tables((*chain, delta), lambda name, index: store[name])["_reduce"][3] == (3, 2)
    assert replay_tables((*chain, delta), lambda name, index: store[name])["_reduce"][4] == (4, 1)
    assert t.changed == {3, 4}  # in the next delta
    get, put, record = batch_access(t)
    assert get(3) == (3, 3) and put == dict.__setitem__.__get__(t)  # the view is gone with its delta
    assert batch_access({})[2]([1]) is None  # a plain dict: nothing to record


def test_a_batch_whose_keys_are_known_saves_their_barrier_values_up_front() -> None:
    """With a snapshot in flight and the batch's keys given, ``batch_access`` saves the barrier
    values of those keys first (``CopyOnWrite.preserve_many``) and hands out the dict's C methods: the
    delta still holds every barrier value, a value changed in place included, and keys the writer
    never had (written after the barrier) or a batch of unhashable keys change nothing in it."""
    from millstream.engine.runtime.state.heap_incremental import batch_access

    b = HeapKeyedStateBackend(128, incremental=True)
    t = b.table("_reduce", "value")
    store, write = _files()
    for k in range(6):
        t[k] = (k, 1)
    t[6] = [6]  # a value a reduce function may append to
    t[7] = ((7,), frozenset({1}))  # nested, immutable
    chain = _base(b, 1, write, first=True)
    for k in (1, 2, 6, 7):
        t[k] = t[k] if k != 6 else [6, 1]
    del t[5]
    plan, read = b.begin_incremental_snapshot(2)
    keys = [1, 2, 6, 7, 5, 9]
    get, put, record = batch_access(t, keys)
    assert get == dict.get.__get__(t) and put == dict.__setitem__.__get__(t)
    get(6).append(2)  # in place, after the barrier
    put(1, (1, 9))
    put(2, (2, 9))
    put(5, (5, 9))  # deleted before the barrier: the delta deletes it
    put(9, (9, 9))  # new since the barrier
    record(keys)
    get, put, record = batch_access(t, [[1]])  # unhashable: key by key, through the views
    with pytest.raises(TypeError):
        put([1], 0)
    delta = write("d2", DELTA, read())
    got = replay_tables((*chain, delta), lambda name, index: store[name])["_reduce"]
    assert got == {0: (0, 1), 1: (1, 1), 2: (2, 1), 3: (3, 1), 4: (4, 1), 6: [6, 1], 7: ((7,), frozenset({1}))}
    assert dict(t)[6] == [6, 1, 2] and t.changed >= {1, 2, 5, 6, 9}



def test_the_writer_takes_each_key_of_overlapping_change_sets_once_without_copying_them_whole() -> None:
    from millstream.engine.runtime.state.heap_incremental import _distinct

    first, second, third = set(range(0, 100_000)), set(range(50_000, 150_000)), {7, 149_999, 200_000}
    keys = _distinct((first, second, third))
    assert not isinstance(keys, (list, set, tuple))  # an iterator taken a block at a time
    taken = list(keys)
    assert len(taken) == len(set(taken)) == 150_001
    assert set(taken) == first | second | third
    assert (first, second, third) == (set(range(0, 100_000)), set(range(50_000, 150_000)), {7, 149_999, 200_000})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (("user-1", 7), True),
        ((1, 2.5, None, b"x", True), True),
        (((7,), frozenset({1, ("a", 2)})), True),
        ((1, [2]), False),
        ((1, (2, {3: 4})), False),
        (frozenset({(1, 2)}), True),
        ([1], False),
        ((), True),
    ],
)
def test_immutable_values_are_told_apart_from_values_that_may_change_in_place(value, expected) -> None:
    """What needs no copy before it is handed out (heap) or written back (on-disk): scalars and tuples
    or frozensets of them, nested or not; anything holding a list or a dict does."""
    from millstream.engine.runtime.state import heap_incremental, lmdb_backend

    assert heap_incremental.immutable(value) is expected and lmdb_backend.immutable(value) is expected
