"""Stream partitioners: which consumer subtask(s) get each record of a batch.

A partitioner works on whole batches (values plus optional timestamps) and
returns one sub-batch per connected consumer, keeping record order per channel.
"""
from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any, Callable

from millstream.engine.runtime.key_group_batch import BATCHED, assign_to_key_groups
from millstream.engine.runtime.key_groups import KeySpec, assign_key_to_operator

Batch = tuple[list[Any], list[int] | None]
_CACHED_TYPES = frozenset({str, int})  # key types the HASH partitioner's cache answers in one C loop


def rescale_targets(src: int, src_parallelism: int, dst_parallelism: int) -> list[int]:
    """RESCALE connects each producer to a contiguous subset of consumers (or vice versa)."""
    if src_parallelism <= dst_parallelism:
        lo = src * dst_parallelism // src_parallelism
        hi = (src + 1) * dst_parallelism // src_parallelism
        return list(range(lo, hi))
    # More producers than consumers: producer src feeds exactly one consumer.
    return [src * dst_parallelism // src_parallelism]


def connected_targets(strategy: str, src: int, src_parallelism: int, dst_parallelism: int) -> list[int]:
    if strategy == "FORWARD":
        return [src]
    if strategy == "RESCALE":
        return rescale_targets(src, src_parallelism, dst_parallelism)
    return list(range(dst_parallelism))


def connected_sources(strategy: str, dst: int, src_parallelism: int, dst_parallelism: int) -> list[int]:
    return [
        s
        for s in range(src_parallelism)
        if dst in connected_targets(strategy, s, src_parallelism, dst_parallelism)
    ]


class StreamPartitioner(ABC):
    """Splits a batch over ``n`` connected channels (positions 0..n-1)."""

    def __init__(self, n: int) -> None:
        self.n = n

    @abstractmethod
    def split(self, values: list[Any], timestamps: list[int] | None) -> list[tuple[int, list[Any], list[int] | None]]:
        ...


class ForwardPartitioner(StreamPartitioner):
    def split(self, values, timestamps):
        return [(0, values, timestamps)]


class BroadcastPartitioner(StreamPartitioner):
    def split(self, values, timestamps):
        return [(i, values, timestamps) for i in range(self.n)]


class RoundRobinPartitioner(StreamPartitioner):
    """REBALANCE and RESCALE: record i of the stream goes to channel (start + i) mod n."""

    def __init__(self, n: int, start: int | None = None) -> None:
        super().__init__(n)
        self.next = random.randrange(n) if start is None else start % n

    def split(self, values, timestamps):
        n = self.n
        if n == 1:
            return [(0, values, timestamps)]
        out = []
        for i in range(min(n, len(values))):
            ch = (self.next + i) % n
            out.append((ch, values[i::n], timestamps[i::n] if timestamps is not None else None))
        self.next = (self.next + len(values)) % n
        return out


class ShufflePartitioner(StreamPartitioner):
    def split(self, values, timestamps):
        picks = random.choices(range(self.n), k=len(values))
        return _group(picks, values, timestamps, self.n)


class KeyGroupStreamPartitioner(StreamPartitioner):
    """HASH: key -> key group -> the consumer subtask owning that group.

    The channel of each key is remembered (up to ``CACHE_KEYS`` keys): a dict lookup costs a
    fraction of encoding and hashing the key again for every record. The cache may answer
    for any key equal to a cached one (``True`` for ``1``, a namedtuple for a tuple), because
    equal keys share their key group (``key_encoding``). The per-record loop asks it directly
    only for exact str and int keys, the common case; other keys ask in ``channel`` and only
    once a key of their type has encoded, so a type that has no encoding is still refused.
    """

    CACHE_KEYS = 65536

    def __init__(self, n: int, key_selector: Callable[[Any], Any], max_parallelism: int, key_spec: KeySpec = None) -> None:
        super().__init__(n)
        self.key_selector = key_selector
        self.max_parallelism = max_parallelism
        self.key_spec = key_spec  # the declared key type: it decides the hash, as in PyFlink
        self.cache: dict[Any, int] = {}
        self.encoded_types: set[type] = set()

    def channel(self, key: Any) -> int:
        t = type(key)
        cache = self.cache
        if t is str or t is int:  # the caller looked it up already
            i = assign_key_to_operator(key, self.max_parallelism, self.n, self.key_spec)
            if len(cache) < self.CACHE_KEYS:
                cache[key] = i
            return i
        encoded = self.encoded_types
        if t in encoded:
            try:
                i = cache.get(key)
            except TypeError:  # unhashable, e.g. a list (it encodes as the equal tuple)
                return assign_key_to_operator(key, self.max_parallelism, self.n, self.key_spec)
            if i is not None:
                return i
        i = assign_key_to_operator(key, self.max_parallelism, self.n, self.key_spec)
        encoded.add(t)
        if len(cache) < self.CACHE_KEYS:
            try:
                cache[key] = i
            except TypeError:
                pass
        return i

    #: keys of a batch not in the cache from which one numpy pass (``key_group_batch``) hashes them:
    #: below it the scalar hash of each is cheaper than the pass's fixed cost (so a smaller batch
    #: goes the per-record way at once)
    BATCH_MISSES = 64

    def split(self, values, timestamps):
        if len(values) >= self.BATCH_MISSES:
            keys = list(map(self.key_selector, values))
            if set(map(type, keys)) <= _CACHED_TYPES:
                return self._split_keys(keys, values, timestamps)
            return self._split_each(keys, values, timestamps)
        return self._split_each(None, values, timestamps)

    def _split_keys(self, keys: list[Any], values, timestamps):
        """Exact str and int keys: looked up in the cache in one C loop; a batch with many misses
        (state with many keys: every key is new) hashes them in one numpy pass, as Flink's
        KeyGroupRangeAssignment would one by one (``key_group_batch`` gives the same key groups)."""
        cache, n, max_p = self.cache, self.n, self.max_parallelism
        picks = list(map(cache.get, keys))
        if None in picks:
            missed = [i for i, p in enumerate(picks) if p is None]
            new = [keys[i] for i in missed]
            if len(new) < self.BATCH_MISSES or not BATCHED:
                channels = list(map(self.channel, new))  # one at a time, cached as they go
            else:
                groups = assign_to_key_groups(new, max_p, self.key_spec)
                channels = (groups * n // max_p).tolist()  # operator_index_for_key_group, vectorised
                room = self.CACHE_KEYS - len(cache)
                if room > 0:
                    cache.update(zip(new[:room], channels[:room]))
            for i, c in zip(missed, channels):
                picks[i] = c
        return _group(picks, values, timestamps, n)

    def _split_each(self, keys: list[Any] | None, values, timestamps):
        """Any keys, one at a time; ``keys``: the batch's keys if already selected (not again: a key
        selector may have effects)."""
        n, get, channel = self.n, self.cache.get, self.channel
        selected = map(self.key_selector, values) if keys is None else keys
        buckets: list[list[Any]] = [[] for _ in range(n)]
        add = [b.append for b in buckets]
        if timestamps is None:
            for v, k in zip(values, selected):
                t = type(k)
                i = get(k) if t is str or t is int else None
                add[channel(k) if i is None else i](v)
            return [(i, b, None) for i, b in enumerate(buckets) if b]
        tbuckets: list[list[int]] = [[] for _ in range(n)]
        tadd = [b.append for b in tbuckets]
        for v, k, ts in zip(values, selected, timestamps):
            t = type(k)
            i = get(k) if t is str or t is int else None
            if i is None:
                i = channel(k)
            add[i](v)
            tadd[i](ts)
        return [(i, b, tbuckets[i]) for i, b in enumerate(buckets) if b]


def _group(picks: list[int], values, timestamps, n: int):
    buckets: list[list[Any]] = [[] for _ in range(n)]
    add = [b.append for b in buckets]
    for p, v in zip(picks, values):
        add[p](v)
    if timestamps is None:
        return [(i, b, None) for i, b in enumerate(buckets) if b]
    tb: list[list[int]] = [[] for _ in range(n)]
    tadd = [b.append for b in tb]
    for p, ts in zip(picks, timestamps):
        tadd[p](ts)
    return [(i, b, tb[i]) for i, b in enumerate(buckets) if b]


class CustomPartitionerWrapper(StreamPartitioner):
    """CUSTOM (partition_custom): the user's partitioner picks each record's channel."""

    def __init__(self, n: int, route: Any) -> None:
        super().__init__(n)
        self.route = route

    def split(self, values, timestamps):
        n, channel = self.n, self.route.channel
        return _group([channel(v, n) for v in values], values, timestamps, n)


def create_partitioner(
    strategy: str,
    n: int,
    key_selector: Callable[[Any], Any] | None = None,
    max_parallelism: int = 128,
    start: int | None = None,
    key_spec: KeySpec = None,
    custom: Any = None,
) -> StreamPartitioner:
    if strategy == "FORWARD":
        return ForwardPartitioner(n)
    if strategy == "BROADCAST":
        return BroadcastPartitioner(n)
    if strategy in ("REBALANCE", "RESCALE"):
        return RoundRobinPartitioner(n, start)
    if strategy == "SHUFFLE":
        return ShufflePartitioner(n)
    if strategy == "HASH":
        if key_selector is None:
            raise ValueError("a HASH edge needs a key selector")
        return KeyGroupStreamPartitioner(n, key_selector, max_parallelism, key_spec)
    if strategy == "CUSTOM":
        if custom is None:
            raise ValueError("a CUSTOM edge needs its partition_custom partitioner")
        return CustomPartitionerWrapper(n, custom)
    raise ValueError(f"unknown ship strategy {strategy}")
