"""ChangeTracker (pure): when a checkpoint is a delta and when a base, and which keys a delta holds."""
from __future__ import annotations

from millstream.engine.runtime.state.incremental import encode_parts, replay
from millstream.engine.runtime.state.state_chain import BASE, DELTA, MERGE_BLOCK, ChangeTracker, MergedChanges, SharedFile


def f(name: str, kind: str, size: int, entries: int = -1) -> SharedFile:
    return SharedFile(name, kind, size, (), entries)


def complete(t: ChangeTracker, cid: int, new: SharedFile) -> None:
    plan = t.plan(cid)
    chain = (new,) if plan.is_base else (*plan.parent, new)
    t.written(cid, chain)
    t.confirm(cid)


def test_a_delta_holds_the_keys_of_every_snapshot_since_the_last_completed_one() -> None:
    t = ChangeTracker()
    t.record("v", b"a", b"1")
    complete(t, 1, f("b", BASE, 100))
    t.record("v", b"b", b"1")
    t.record("v", b"c", b"1")
    p2 = t.plan(2)  # taken, never completed (failed)
    t.written(2, (*p2.parent, f("d2", DELTA, 1)))
    t.record("v", b"c", b"2")  # the later record of a key wins
    t.record("w", b"c", None)  # deleted
    p3 = t.plan(3)
    assert not p3.is_base and [x.name for x in p3.parent] == ["b"]
    assert isinstance(p3.changed, MergedChanges) and not p3.changed.merged  # the barrier merged nothing
    assert p3.changed == {"v": {b"b": b"1", b"c": b"2"}, "w": {b"c": None}}  # the writer's read does
    assert p3.changed.merged
    t.written(3, (*p3.parent, f("d3", DELTA, 1)))
    t.confirm(3)
    t.record("v", b"d", b"1")
    p4 = t.plan(4)
    assert [x.name for x in p4.parent] == ["b", "d3"] and p4.changed == {"v": {b"d": b"1"}}


def test_merged_changes_merge_blocks_of_records_later_ones_winning() -> None:
    n = 2 * MERGE_BLOCK + 7
    first = {"v": {i.to_bytes(4, "big"): b"1" for i in range(n)}}
    second = {"v": {i.to_bytes(4, "big"): None for i in range(0, n, 3)}, "w": {b"x": b"2"}}
    merged = MergedChanges([first, second])
    assert len(merged) == 2 and set(merged) == {"v", "w"}
    v = merged["v"]
    assert len(v) == n and all(v[i.to_bytes(4, "big")] == (None if i % 3 == 0 else b"1") for i in range(n))
    assert dict(merged.items())["w"] == {b"x": b"2"}
    assert first["v"][(0).to_bytes(4, "big")] == b"1"  # the intervals' own records are left as they were


def test_a_base_comes_after_max_deltas_or_when_deltas_outweigh_it() -> None:
    t = ChangeTracker(max_deltas=2)
    complete(t, 1, f("b", BASE, 100))
    complete(t, 2, f("d2", DELTA, 10))
    complete(t, 3, f("d3", DELTA, 10))
    assert t.plan(4).is_base  # two deltas already
    t = ChangeTracker(max_deltas=10)
    complete(t, 1, f("b", BASE, 100))
    complete(t, 2, f("d2", DELTA, 60))
    assert not t.plan(3).is_base
    complete(t, 4, f("d4", DELTA, 60))
    assert t.plan(5).is_base  # 120 bytes of deltas on a 100-byte base


def test_a_counted_chain_gets_a_base_only_once_it_holds_twice_the_live_entries() -> None:
    # The on-disk backend counts its files' entries: a stream of new keys (deltas outweighing the
    # base, overwriting nothing) no longer re-reads the whole state every few checkpoints.
    t = ChangeTracker(max_deltas=10)
    complete(t, 1, f("b", BASE, 100, entries=100))
    complete(t, 2, f("d2", DELTA, 150, entries=150))
    complete(t, 3, f("d3", DELTA, 200, entries=200))
    assert not t.plan(4, live=450).is_base  # every entry a new key: the chain is the state
    t = ChangeTracker(max_deltas=10)
    complete(t, 1, f("b", BASE, 100, entries=100))
    complete(t, 2, f("d2", DELTA, 150, entries=150))
    assert t.plan(3, live=100).is_base  # the same 100 keys rewritten: a restore replays 2.5x the state
    t = ChangeTracker(max_deltas=2)
    complete(t, 1, f("b", BASE, 100, entries=100))
    complete(t, 2, f("d2", DELTA, 1, entries=1))
    complete(t, 3, f("d3", DELTA, 1, entries=1))
    assert t.plan(4, live=102).is_base  # max_deltas still bounds the chain


def test_the_records_kept_are_bounded_in_bytes() -> None:
    t = ChangeTracker(max_tracked_bytes=10_000)
    complete(t, 1, f("b", BASE, 100))
    t.record("v", b"k", b"x" * 5_000)
    t.record("v", b"k", b"x" * 100)  # replaced: the bytes follow the record kept
    t.record("v", b"j", b"x" * 5_000)
    assert not t.plan(2).is_base
    t.record("v", b"k", b"x" * 6_000)
    t.record("v", b"j", b"x" * 6_000)
    assert t.plan(3).is_base and not t.changes


def test_too_many_changed_keys_a_cleared_table_or_an_abort_give_a_base() -> None:
    t = ChangeTracker(max_tracked=3)
    complete(t, 1, f("b", BASE, 100))
    for k in (b"1", b"2", b"3", b"4"):
        t.record("v", k, b"")
    assert t.plan(2).is_base and not t.changes  # the set was dropped, not kept growing
    t = ChangeTracker()
    complete(t, 1, f("b", BASE, 100))
    t.table_cleared()
    assert t.plan(2).is_base
    t = ChangeTracker()
    complete(t, 1, f("b", BASE, 100))
    t.plan(2)
    t.abort(2)
    assert t.plan(3).is_base
    t.abort(99)  # not a snapshot of this tracker (a savepoint): nothing changes


def test_confirming_an_unknown_or_unwritten_checkpoint_changes_nothing() -> None:
    t = ChangeTracker()
    complete(t, 1, f("b", BASE, 100))
    t.plan(2)  # its files are not written yet
    t.confirm(2)
    t.confirm(7)
    assert [x.name for x in t.confirmed] == ["b"]  # type: ignore[union-attr]


def test_replay_reads_only_the_key_groups_asked_for_and_applies_tombstones() -> None:
    base = encode_parts({"v": [(b"\x00\x01a", b"1"), (b"\x00\x01b", b"2"), (b"\x00\x05c", b"3")]})
    delta = encode_parts({"v": [(b"\x00\x01a", None), (b"\x00\x05c", b"4")]})
    files = {"b": dict(base), "d": dict(delta)}
    chain = (
        SharedFile("b", BASE, 0, tuple((kg, 0, 0) for kg, _ in base)),
        SharedFile("d", DELTA, 0, tuple((kg, 0, 0) for kg, _ in delta)),
    )
    asked = []

    def read(name, ranges):
        asked.append((name, [kg for kg, _, _ in ranges]))
        return [(kg, files[name][kg]) for kg, _, _ in ranges]

    assert replay(chain, range(0, 4), read) == {"v": [(b"\x00\x01b", b"2")]}
    assert asked == [("b", [1]), ("d", [1])]
    assert replay(chain, range(0, 16), read) == {"v": [(b"\x00\x01b", b"2"), (b"\x00\x05c", b"4")]}


def test_parts_are_pickled_without_the_memo_and_read_back_exactly() -> None:
    """A part's records are bytes in tuples: pickled with no memo (no PUT opcode per object, the
    larger half of the encode), and ``pickle.loads`` gives them back equal, tombstones included."""
    import pickle
    import pickletools

    from millstream.engine.runtime.state.incremental import encode_groups

    same = b"\x80\x05K\x07."  # one record object under two keys: written twice, read back equal
    tables = {"v": [(b"\x00\x03k%d" % i, same if i % 3 else None) for i in range(50)], "w": [(b"\x00\x03z", b"1")]}
    for kg, payload in [*encode_parts(tables), *encode_groups([(3, tables)])]:
        assert kg == 3
        assert pickle.loads(payload) == tables
        ops = {op.name for op, _, _ in pickletools.genops(payload)}
        assert not ops & {"MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"}, ops
