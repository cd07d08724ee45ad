"""Map-side combining for a keyed reduce on Spark, as the MapReduce combiner does.

Each partition reduces its own records per key before the shuffle, calling
the user's reduce function directly: no (key, value) pair per record and no
per-record wrapper, which is what PySpark's generic ``reduceByKey`` combiner
costs. Memory stays bounded: once a partition holds ``max_keys`` distinct
keys its partial results go downstream and it starts afresh, as Flink's
combiners emit partial results; the reduce after the shuffle merges them.
Nothing here imports PySpark.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from millstream.engine.runtime.state_keys import hashable_key

#: distinct keys a partition combines before it hands its partial results on
MAX_COMBINED_KEYS = 100_000


def hashable_keys(key_selector: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The selector with a list key (PyFlink keys lists by their pickle) made the equal tuple, as
    key_by routes it, so Spark's dicts and shuffles can hold it."""

    def key(v: Any) -> Any:
        k = key_selector(v)
        return hashable_key(k) if k.__class__ is list else k

    return key


def combine_partition(
    key_selector: Callable[[Any], Any], reduce_fn: Callable[[Any, Any], Any], max_keys: int = MAX_COMBINED_KEYS
) -> Callable[[Iterable[Any]], Iterator[tuple[Any, Any]]]:
    """``mapPartitions`` function: records in, (key, partial reduce) pairs out, in the order keys first came."""
    if max_keys < 1:
        raise ValueError(f"max_keys must be at least 1, got {max_keys}")

    def run(records: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        combined: dict[Any, Any] = {}
        for v in records:
            k = key_selector(v)
            if k in combined:
                combined[k] = reduce_fn(combined[k], v)
            else:
                if len(combined) >= max_keys:
                    yield from combined.items()
                    combined = {}
                combined[k] = v
        yield from combined.items()

    return run
