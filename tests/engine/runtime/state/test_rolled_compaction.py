"""Rolled compaction of a chain (issue 16, ``rolled_compaction``): which file each key group's replay starts from, what a
replay reads, which files leave the chain, and which key groups a checkpoint rebases. Pure
bookkeeping on ``SharedFile`` records; no file is read."""
from __future__ import annotations

import pytest

from millstream.engine.runtime.state.rolled_compaction import MAX_TURNS, RolledCompaction, RolledCredit, prune, rolled_due, turns
from millstream.engine.runtime.state.state_chain import BASE, DELTA, SharedFile, key_group_starts, replay_reads


def _file(name: str, kind: str, groups: dict[int, int], partial: bool = False) -> SharedFile:
    index, offset = [], 0
    for kg, length in sorted(groups.items()):
        index.append((kg, offset, length))
        offset += length
    return SharedFile(name, kind, offset, tuple(index), grouped=True, partial=partial)


def test_each_key_group_replays_from_its_newest_base() -> None:
    chain = (
        _file("b", BASE, {0: 100, 1: 100, 2: 100}),
        _file("d1", DELTA, {0: 10, 1: 10, 2: 10}),
        _file("p1", BASE, {1: 105}, partial=True),
        _file("d2", DELTA, {0: 10, 1: 10}),
    )
    assert key_group_starts(chain) == (0, {1: 2})
    reads = [(i, [r[0] for r in index]) for i, _, index in replay_reads(chain)]
    assert reads == [(0, [0, 2]), (1, [0, 2]), (2, [1]), (3, [0, 1])]
    assert [(i, [r[0] for r in index]) for i, _, index in replay_reads(chain, {1})] == [(2, [1]), (3, [1])]


def test_a_whole_base_starts_every_key_group_and_drops_what_came_before() -> None:
    chain = (
        _file("p0", BASE, {1: 5}, partial=True),
        _file("b", BASE, {0: 100, 1: 100}),
        _file("d", DELTA, {1: 10}),
    )
    assert key_group_starts(chain) == (1, {})
    assert [f.name for f in prune(chain)] == ["b", "d"]


def test_a_file_leaves_the_chain_once_each_of_its_key_groups_has_a_newer_base() -> None:
    chain = (
        _file("d0", DELTA, {0: 50, 1: 50}),  # begun from empty: stands for the base
        _file("d1", DELTA, {0: 10, 1: 10}),
        _file("p1", BASE, {0: 55}, partial=True),
        _file("d2", DELTA, {0: 10, 1: 10}),
        _file("p2", BASE, {1: 60}, partial=True),
        _file("d3", DELTA, {0: 1}),
        _file("p3", BASE, {0: 56}, partial=True),  # the newest two stay, whatever they hold
    )
    assert [f.name for f in prune(chain)] == ["p2", "d3", "p3"]  # d2: before both key groups' bases
    # and the pruned chain replays the same parts
    assert [(f.name, index) for _, f, index in replay_reads(prune(chain))] == [
        (f.name, index) for _, f, index in replay_reads(chain)
    ]


def test_the_byte_credit_pays_for_the_key_groups_with_the_most_replay_first() -> None:
    chain = (
        _file("b", BASE, {0: 100, 1: 100, 2: 100, 3: 100}),
        _file("d1", DELTA, {0: 60, 1: 30, 2: 90, 3: 10}),
        _file("d2", DELTA, {0: 60, 1: 30, 2: 90, 3: 10}),
    )
    credit = RolledCredit()
    # a key group costs its base and replay: 300 bytes of delta pay for key group 2's 280, whose
    # replay is the largest against its base; key groups 1 and 3 replay less than their base
    assert rolled_due(chain, credit, 300, cycle=1000) == [2]
    credit.spend(280)
    assert credit.bytes == 20
    assert rolled_due(chain, credit, 500, cycle=1000) == [0, 2]
    assert rolled_due(chain, RolledCredit(), 0, cycle=1000) == []


def test_the_cycle_rebases_the_key_group_rebased_longest_ago_when_little_changes() -> None:
    chain = (
        _file("b", BASE, {0: 100, 1: 100, 2: 100, 3: 100}),
        _file("p1", BASE, {0: 100}, partial=True),
        _file("p2", BASE, {2: 100}, partial=True),
        _file("d1", DELTA, {3: 1}),
    )
    credit = RolledCredit()
    picked = [rolled_due(chain, credit, 1, cycle=8) for _ in range(4)]  # half a key group per checkpoint
    assert picked == [[], [1], [], [1]]  # the longest ago, 1 and 3 tie on the whole base: the lower first


def test_a_stream_of_new_keys_is_rebased_at_the_pace_of_its_deltas_not_all_at_once() -> None:
    """Every key group's replay passes its base under new keys; the credit, not a ratio rule, says how
    many are rebased, so no checkpoint rewrites most of the state."""
    groups = range(64)
    chain: tuple[SharedFile, ...] = (_file("d0", DELTA, {kg: 10 for kg in groups}),)
    credit = RolledCredit()
    deltas = rebased_bytes = 0
    for cid in range(1, 200):
        delta = _file(f"d{cid}", DELTA, {kg: 10 for kg in groups})
        chain = (*chain, delta)
        due = rolled_due(chain, credit, delta.size, cycle=128)
        deltas += delta.size
        if due:
            sizes = {kg: sum(length for _, _, index in replay_reads(chain, {kg}) for _, _, length in index) for kg in due}
            rebased = _file(f"p{cid}", BASE, sizes, partial=True)
            credit.spend(rebased.size)
            rebased_bytes += rebased.size
            # at most about a delta and one key group (a key group holds cid deltas' worth / 64)
            assert rebased.size <= 2 * delta.size + 10 * (cid + 1)
            chain = (*chain, rebased)
        chain = prune(chain)
    assert rebased_bytes <= deltas + 10 * 200
    assert len(chain) <= 128 + 64


def test_subtasks_take_turns_and_no_checkpoint_of_the_job_writes_more_than_twice_what_changed() -> None:
    """1 % of the state per interval over 2 subtasks: a key group's base (1/128 of the state) is larger
    than one subtask's delta (1/200). When each subtask could rebase in every checkpoint, some
    checkpoints had both rebase and wrote 2.6x what changed; in turns, every checkpoint of the job
    writes its deltas and at most one subtask's bases."""
    import random

    rng = random.Random(7)
    subtasks, key_groups, per_group, updates = 2, 128, 100, 128  # entries of one byte each: bytes = entries
    owned = [range(i * key_groups // subtasks, (i + 1) * key_groups // subtasks) for i in range(subtasks)]
    compactions = [RolledCompaction() for _ in owned]
    for i, c in enumerate(compactions):
        c.take_turns(i, subtasks)
    chains = [(_file("b", BASE, {kg: per_group for kg in groups}),) for groups in owned]
    ratios = []
    for cid in range(1, 700):
        changed = {}
        for _ in range(updates):  # 1 % of the 12,800 keys
            kg = rng.randrange(key_groups)
            changed[kg] = changed.get(kg, 0) + 1
        written = 0
        for i, groups in enumerate(owned):
            delta = _file(f"d{cid}", DELTA, {kg: n for kg, n in changed.items() if kg in groups})
            due = compactions[i].choose((*chains[i], delta), delta.size, len(groups) * per_group, cid)
            assert not due or cid % 2 == i  # only in its turn
            chains[i] = (*chains[i], delta)
            written += delta.size
            if due:
                rebased = _file(f"p{cid}", BASE, {kg: per_group for kg in due}, partial=True)
                compactions[i].written(rebased.size)
                written += rebased.size
                chains[i] = (*chains[i], rebased)
            chains[i] = prune(chains[i])
        if cid > 256:  # two cycles: past the first base's files
            ratios.append(written / updates)
    assert max(ratios) <= 2.0
    assert sum(ratios) / len(ratios) >= 1.5  # and the chains are still compacted: about a key group per checkpoint
    assert max(map(len, chains)) <= 2 * 128 + 64


def test_turns_repeat_every_few_checkpoints_however_many_subtasks() -> None:
    assert [turns(i, 2) for i in range(2)] == [(0, 2), (1, 2)]
    assert turns(0, 1) == (0, 1)
    assert {turns(i, 32) for i in range(32)} == {(p, MAX_TURNS) for p in range(MAX_TURNS)}
    # out of its turn a subtask earns credit and rebases nothing; in its turn it spends it
    chain = (_file("b", BASE, {0: 100, 1: 100}), _file("d1", DELTA, {0: 120, 1: 10}))
    c = RolledCompaction()
    c.take_turns(1, 2)
    assert c.choose(chain, 130, None, 4) == []
    assert c.credit.bytes == 130
    assert c.choose(chain, 130, None, 5) == [0]


def test_only_a_grouped_base_can_be_partial() -> None:
    f = _file("p", BASE, {3: 10}, partial=True)
    assert SharedFile.from_wire(f.to_wire()) == f
    wire = {**f.to_wire(), "kind": DELTA}
    with pytest.raises(ValueError, match="partial"):
        SharedFile.from_wire(wire)


def test_a_file_carries_its_index_and_a_chain_on_the_wire_lists_only_names(tmp_path) -> None:
    """A rolled chain holds ~170 files of 64 parts at 1 % per interval: with every index in the state
    file, each checkpoint wrote 155 KB of indexes, more than a 1 % delta of 1 M keys. The heap's files
    carry their index in a footer, read back by a restore or the writer (``with_indexes``)."""
    import pickle

    from millstream.engine.checkpoint.storage import read_shared_file, write_shared_file
    from millstream.engine.runtime.state.state_chain import FOOTER, chain_from_wire, chain_to_wire, encode_index, with_indexes, written_file

    shared = str(tmp_path / "shared")
    parts = [(kg, bytes([kg]) * (100 + kg)) for kg in range(64)]
    size, index = write_shared_file(shared, "op-0-1.delta", parts, "job", (FOOTER, encode_index))
    f = written_file("op-0-1.delta", DELTA, size, index)
    assert f.footer is not None and [r[0] for r in f.index] == list(range(64))

    def read(name: str, ranges: list) -> list:
        return read_shared_file(shared, name, ranges, "job")

    wire = chain_to_wire((f,))
    assert "index" not in wire[0]
    (back,) = chain_from_wire(wire)
    assert not back.indexed
    with pytest.raises(ValueError, match="with_indexes"):
        list(replay_reads((back,)))
    (loaded,) = with_indexes((back,), read)
    assert loaded.index == f.index
    assert read(loaded.name, [loaded.index[5]]) == [parts[5]]
    many = [written_file(f"3f2a9c1e-op-{i}-1234.delta", DELTA, size, index) for i in range(170)]
    assert len(pickle.dumps(chain_to_wire(many), 5)) < 25_000


def test_a_malformed_footer_is_refused() -> None:
    from millstream.engine.runtime.state.state_chain import decode_index, encode_index

    assert decode_index(encode_index([(1, 0, 10), (2, 10, 5)]), 15) == ((1, 0, 10), (2, 10, 5))
    with pytest.raises(ValueError, match="outside"):
        decode_index(encode_index([(1, 0, 10), (2, 10, 50)]), 15)
    with pytest.raises(ValueError, match="malformed"):
        decode_index(encode_index([(1, 0)]), 15)
    import msgpack

    with pytest.raises(ValueError, match="malformed"):
        decode_index(msgpack.packb({"x": 1}), 15)
