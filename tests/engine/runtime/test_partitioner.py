"""Stream partitioners: which channel each record of a batch goes to."""
from __future__ import annotations

import itertools
import random

import pytest

from millstream.engine.runtime.key_groups import assign_key_to_operator, assign_to_key_group, key_group_range
from millstream.engine.runtime.partitioner import (
    BroadcastPartitioner,
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    RoundRobinPartitioner,
    ShufflePartitioner,
    connected_sources,
    connected_targets,
    create_partitioner,
    rescale_targets,
)


def _collect(partitioner, batches, with_timestamps=True):
    """Run batches through a partitioner; per channel, the (value, timestamp) pairs in order."""
    out: dict[int, list[tuple]] = {}
    for values in batches:
        ts = [v * 10 for v in values] if with_timestamps else None
        for ch, vs, chts in partitioner.split(list(values), ts):
            assert 0 <= ch < partitioner.n
            if with_timestamps:
                assert chts is not None and len(chts) == len(vs)
                out.setdefault(ch, []).extend(zip(vs, chts))
            else:
                assert chts is None
                out.setdefault(ch, []).extend((v, None) for v in vs)
    return out


def test_forward_sends_the_whole_batch_to_channel_zero():
    p = ForwardPartitioner(1)
    assert p.split([1, 2, 3], [10, 20, 30]) == [(0, [1, 2, 3], [10, 20, 30])]


def test_broadcast_sends_the_whole_batch_to_every_channel():
    p = BroadcastPartitioner(3)
    assert p.split([1, 2], None) == [(0, [1, 2], None), (1, [1, 2], None), (2, [1, 2], None)]


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("start", [0, 2])
def test_round_robin_is_even_and_keeps_order_across_batches(n, start):
    p = RoundRobinPartitioner(n, start=start)
    sizes = [5, 1, 7, 0, 2, 13]
    stream = list(range(sum(sizes)))
    it = iter(stream)
    batches = [[next(it) for _ in range(s)] for s in sizes]
    out = _collect(p, batches)
    counts = [len(out.get(ch, [])) for ch in range(n)]
    assert sum(counts) == len(stream)
    assert max(counts) - min(counts) <= 1
    for ch, pairs in out.items():
        values = [v for v, _ in pairs]
        assert values == sorted(values)  # per-channel order is stream order
        assert all(t == v * 10 for v, t in pairs)  # timestamps stay with their records
        # Record i of the stream goes to channel (start + i) mod n.
        assert all((start + v) % n == ch for v in values)


def test_round_robin_without_timestamps():
    out = _collect(RoundRobinPartitioner(2, start=0), [[0, 1, 2, 3]], with_timestamps=False)
    assert out == {0: [(0, None), (2, None)], 1: [(1, None), (3, None)]}


def test_round_robin_random_start_is_within_range():
    for _ in range(20):
        assert 0 <= RoundRobinPartitioner(4).next < 4


def _mod_key(v):
    return v % 17


@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("max_p", [7, 128])
def test_hash_partitioner_routes_through_key_groups(n, max_p):
    p = KeyGroupStreamPartitioner(n, _mod_key, max_p)
    out = _collect(p, [list(range(0, 100)), list(range(100, 250))])
    seen_channel: dict[int, int] = {}
    for ch, pairs in out.items():
        values = [v for v, _ in pairs]
        assert values == sorted(values)
        assert all(t == v * 10 for v, t in pairs)
        for v in values:
            key = _mod_key(v)
            assert seen_channel.setdefault(key, ch) == ch  # equal keys meet in one channel
            assert ch == assign_key_to_operator(key, max_p, n)
            assert assign_to_key_group(key, max_p) in key_group_range(max_p, n, ch)
    assert sum(len(v) for v in out.values()) == 250


@pytest.mark.parametrize(
    "selector",
    [lambda v: f"user-{v % 9}", lambda v: (v % 4, "x"), lambda v: v % 5 == 0],
    ids=["str", "tuple", "bool"],
)
def test_hash_partitioner_agrees_with_key_groups_for_any_key_type(selector):
    p = KeyGroupStreamPartitioner(4, selector, 128)
    for ch, vs, _ in p.split(list(range(60)), None):
        assert all(assign_key_to_operator(selector(v), 128, 4) == ch for v in vs)


def test_hash_partitioner_key_cache_routes_equal_keys_of_other_types_alike():
    # 1, True and 1.0 are one dict key and, since key encoding 2, one key group: whichever
    # of them fills the cache, the others read the same channel from it.
    keys = [1, True, 1.0, 0, False, 0.0, "1", b"1"] * 3
    for n in (2, 3, 5, 8):
        for order in (keys, keys[::-1]):
            p = KeyGroupStreamPartitioner(n, lambda v: v, 128)
            for _ in range(2):  # the second pass reads the cached channels
                routed = {}
                for ch, vs, _ in p.split(order, None):
                    assert all(assign_key_to_operator(v, 128, n) == ch for v in vs), (n, ch, vs)
                    routed.update({(type(v), v): ch for v in vs})
                assert routed[(int, 1)] == routed[(bool, True)] == routed[(float, 1.0)]
                assert routed[(int, 0)] == routed[(bool, False)] == routed[(float, 0.0)]
            assert len(p.cache) == 4  # 1, 0, "1", b"1"


def test_hash_partitioner_cache_does_not_admit_a_refused_type_by_equality():
    # A key of a type with no encoding must fail even when it equals a cached key.
    class Sneaky:
        def __eq__(self, other):
            return other == "a"

        def __hash__(self):
            return hash("a")

    p = KeyGroupStreamPartitioner(4, lambda v: v, 128)
    p.split(["a"], None)
    with pytest.raises(TypeError, match="Sneaky has no stable encoding"):
        p.split([Sneaky()], None)


def test_hash_partitioner_key_cache_is_bounded():
    p = KeyGroupStreamPartitioner(4, lambda v: v, 128)
    p.CACHE_KEYS = 100
    values = [f"k{i}" for i in range(1000)]
    out = p.split(values, list(range(1000)))
    assert len(p.cache) == 100
    for ch, vs, ts in out:
        assert all(assign_key_to_operator(v, 128, 4) == ch for v in vs)
        assert [int(v[1:]) for v in vs] == ts


def test_hash_partitioner_omits_empty_channels():
    p = KeyGroupStreamPartitioner(8, lambda v: "same", 128)
    result = p.split([1, 2, 3], None)
    assert len(result) == 1
    assert result[0][1] == [1, 2, 3]


def test_shuffle_keeps_every_record_with_its_timestamp():
    random.seed(7)
    out = _collect(ShufflePartitioner(3), [list(range(50)), list(range(50, 90))])
    pairs = sorted(itertools.chain.from_iterable(out.values()))
    assert pairs == [(v, v * 10) for v in range(90)]
    for chpairs in out.values():
        values = [v for v, _ in chpairs]
        assert values == sorted(values)


def test_create_partitioner():
    assert isinstance(create_partitioner("FORWARD", 1), ForwardPartitioner)
    assert isinstance(create_partitioner("BROADCAST", 3), BroadcastPartitioner)
    assert isinstance(create_partitioner("REBALANCE", 3), RoundRobinPartitioner)
    assert isinstance(create_partitioner("RESCALE", 3), RoundRobinPartitioner)
    assert isinstance(create_partitioner("SHUFFLE", 3), ShufflePartitioner)
    assert create_partitioner("REBALANCE", 3, start=4).next == 1
    hp = create_partitioner("HASH", 3, key_selector=len, max_parallelism=64)
    assert isinstance(hp, KeyGroupStreamPartitioner) and hp.max_parallelism == 64
    with pytest.raises(ValueError, match="key selector"):
        create_partitioner("HASH", 3)
    with pytest.raises(ValueError, match="unknown"):
        create_partitioner("GLOBAL", 3)


# -- which subtasks are connected -----------------------------------------------

PARALLELISMS = list(itertools.product(range(1, 7), range(1, 7)))


@pytest.mark.parametrize(("sp", "dp"), PARALLELISMS)
def test_rescale_connects_contiguous_groups_and_starves_nobody(sp, dp):
    all_targets = [rescale_targets(s, sp, dp) for s in range(sp)]
    for targets in all_targets:
        assert targets, "every producer feeds at least one consumer"
        assert targets == list(range(targets[0], targets[-1] + 1))
    for d in range(dp):
        sources = connected_sources("RESCALE", d, sp, dp)
        assert sources, "every consumer is fed by at least one producer"
        assert sources == list(range(sources[0], sources[-1] + 1))
        # connected_sources and rescale_targets are inverses of each other.
        assert sources == [s for s in range(sp) if d in all_targets[s]]
    if sp <= dp:
        # Each consumer has exactly one producer: the targets partition the consumers.
        assert sorted(itertools.chain.from_iterable(all_targets)) == list(range(dp))
    else:
        assert all(len(t) == 1 for t in all_targets)


@pytest.mark.parametrize(("sp", "dp"), PARALLELISMS)
@pytest.mark.parametrize("strategy", ["REBALANCE", "HASH", "BROADCAST", "SHUFFLE"])
def test_all_to_all_strategies_connect_everything(strategy, sp, dp):
    for s in range(sp):
        assert connected_targets(strategy, s, sp, dp) == list(range(dp))
    for d in range(dp):
        assert connected_sources(strategy, d, sp, dp) == list(range(sp))


@pytest.mark.parametrize("p", [1, 3])
def test_forward_connects_subtask_i_to_subtask_i(p):
    for i in range(p):
        assert connected_targets("FORWARD", i, p, p) == [i]
        assert connected_sources("FORWARD", i, p, p) == [i]


def test_hash_partitioner_routes_unhashable_list_keys_as_the_equal_tuples():
    # A list cannot be cached (or held by the heap backend), but it still routes like its tuple.
    p = KeyGroupStreamPartitioner(8, lambda v: v[0], 128)
    values = [(["a", i % 3],) for i in range(12)] + [(("a", i % 3),) for i in range(12)]
    for _ in range(2):
        for ch, vs, _ in p.split(values, None):
            assert all(assign_key_to_operator(tuple(v[0]), 128, 8) == ch for v in vs)
    assert set(p.cache) == {("a", 0), ("a", 1), ("a", 2)}


def test_custom_partitioner_routes_by_the_users_partition_and_refuses_a_bad_index():
    from millstream.engine.graph.custom_partition import CustomPartition

    p = create_partitioner("CUSTOM", 3, custom=CustomPartition(lambda k, n: k % n, lambda v: v[0]))
    out = p.split([(0, "a"), (4, "b"), (5, "c"), (3, "d")], [10, 11, 12, 13])
    assert sorted(out) == [(0, [(0, "a"), (3, "d")], [10, 13]), (1, [(4, "b")], [11]), (2, [(5, "c")], [12])]
    bad = create_partitioner("CUSTOM", 3, custom=CustomPartition(lambda k, n: n, lambda v: v))
    with pytest.raises(ValueError, match="returned 3 for a record, but the stream has 3 partitions"):
        bad.split([1], None)


from hypothesis import given, settings
from hypothesis import strategies as st

_SPEC_KEYS = {
    None: st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=6)),
    "LONG": st.integers(-(2**63), 2**63 - 1),
    "INT": st.integers(-(2**31), 2**31 - 1),
    "STRING": st.text(max_size=6),
}


@st.composite
def _batches(draw):
    spec = draw(st.sampled_from(list(_SPEC_KEYS)))
    size = draw(st.sampled_from([0, 5, 63, 64, 65, 200, 300]))  # around the one-pass threshold (64)
    keys = draw(st.lists(_SPEC_KEYS[spec], min_size=size, max_size=size))
    if draw(st.booleans()):  # a key its declared type cannot hash, somewhere: refused either way
        keys.insert(draw(st.integers(0, len(keys))), draw(st.sampled_from([1.5, 2**80, "x", 7])))
    return spec, keys


@settings(max_examples=80, deadline=None)
@given(batch=_batches(), n=st.sampled_from([1, 2, 3, 5]), cached=st.integers(0, 100), stamped=st.booleans())
def test_a_batch_of_new_keys_hashed_at_once_goes_where_each_key_alone_goes(batch, n, cached, stamped) -> None:
    """The HASH partitioner hashes a batch's cache misses in one numpy pass (state with millions of
    keys: every key is new): each record must still reach the subtask Flink's assignment gives its key
    alone, in order, with its timestamp, whether or not its key was cached."""
    spec, keys = batch

    def expected(k):
        try:
            return ("ok", assign_key_to_operator(k, 128, n, spec))
        except Exception as e:
            return ("error", type(e))

    want = [expected(k) for k in keys]
    p = KeyGroupStreamPartitioner(n, lambda v: v[1], 128, spec)
    values = list(enumerate(keys))
    warm = [v for v, w in zip(values[:cached], want) if w[0] == "ok"]
    if warm:
        p.split(warm, None)  # some keys cached already
    stamps = [10 * i for i in range(len(values))] if stamped else None
    if any(w[0] == "error" for w in want):
        with pytest.raises(Exception):
            p.split(values, stamps)
        return
    routed = p.split(values, stamps)
    assert sum(len(vs) for _, vs, _ in routed) == len(values)
    for ch, vs, ts in routed:
        assert all(want[i] == ("ok", ch) for i, _ in vs), (spec, n, ch)
        assert [i for i, _ in vs] == sorted(i for i, _ in vs)
        assert ts == ([10 * i for i, _ in vs] if stamped else None)


def test_a_batch_of_many_new_keys_is_hashed_in_one_pass_and_cached() -> None:
    p = KeyGroupStreamPartitioner(3, lambda v: v, 128, "LONG")
    keys = list(range(10_000, 10_000 + 2 * p.BATCH_MISSES))
    routed = p.split(keys, None)
    assert all(assign_key_to_operator(k, 128, 3, "LONG") == ch for ch, vs, _ in routed for k in vs)
    assert set(p.cache) == set(keys)
