"""The map-side combiner of a keyed reduce: plain functions over lists, no Spark."""
from __future__ import annotations

import random

import pytest

from millstream.engine.spark.combiner import combine_partition


def _reduce(a, b):
    """(key, sum, ids in the order they were reduced): shows both the result and the order."""
    return a[0], a[1] + b[1], a[2] + b[2]


def test_combines_per_key_in_arrival_order():
    records = [("a", 1, (0,)), ("b", 2, (1,)), ("a", 3, (2,)), ("a", 4, (3,)), ("b", 5, (4,))]
    out = list(combine_partition(lambda r: r[0], _reduce)(iter(records)))
    assert out == [("a", ("a", 8, (0, 2, 3))), ("b", ("b", 7, (1, 4)))]


@pytest.mark.parametrize("max_keys", [1, 2, 7, 10, 1000])
def test_bounded_memory_hands_on_partials_that_merge_to_the_same_result(max_keys):
    rng = random.Random(max_keys)
    records = [(rng.choice("abcdefghij"), rng.randrange(100), (i,)) for i in range(2000)]
    out = list(combine_partition(lambda r: r[0], _reduce, max_keys=max_keys)(iter(records)))
    if max_keys >= 10:
        assert len(out) == 10  # every key combined once
    else:
        assert len(out) > 10  # partials handed on: a key comes again after its first partial left
    merged: dict = {}
    for k, partial in out:  # what reduceByKey does after the shuffle, in the order partials arrive
        merged[k] = _reduce(merged[k], partial) if k in merged else partial
    for k, (key, total, ids) in merged.items():
        mine = [r for r in records if r[0] == k]
        assert key == k and total == sum(r[1] for r in mine)
        assert ids == tuple(r[2][0] for r in mine)  # the reduce saw the records in arrival order


def test_max_keys_must_be_positive():
    with pytest.raises(ValueError, match="max_keys must be at least 1, got 0"):
        combine_partition(lambda r: r, lambda a, b: a, max_keys=0)
