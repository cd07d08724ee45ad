"""Built-in keyed aggregations: sum/min/max/min_by/max_by on tuples, Rows, lists and scalars."""
from __future__ import annotations

from functools import reduce

import pytest

from engine.common.row import Row
from engine.datastream.aggregators import (
    MaxAggregator,
    MaxByAggregator,
    MinAggregator,
    MinByAggregator,
    SumAggregator,
)


def _fold(agg, records):
    return reduce(agg.reduce, records)


TUPLES = [("a", 3, "first"), ("a", 1, "second"), ("a", 5, "third"), ("a", 1, "fourth")]


def test_sum_on_tuples_keeps_the_first_records_other_fields():
    assert _fold(SumAggregator(1), TUPLES) == ("a", 10, "first")


def test_min_and_max_on_tuples_keep_the_first_records_other_fields():
    assert _fold(MinAggregator(1), TUPLES) == ("a", 1, "first")
    assert _fold(MaxAggregator(1), TUPLES) == ("a", 5, "first")


def test_min_by_and_max_by_return_whole_records_and_the_first_on_ties():
    assert _fold(MinByAggregator(1), TUPLES) == ("a", 1, "second")
    assert _fold(MaxByAggregator(1), TUPLES + [("a", 5, "late")]) == ("a", 5, "third")


def test_sum_on_a_named_row_stays_a_named_row():
    rows = [Row(key="k", total=2), Row(key="k", total=3)]
    out = _fold(SumAggregator(1), rows)
    assert isinstance(out, Row)
    assert out.as_dict() == {"key": "k", "total": 5}
    assert out.total == 5


def test_aggregations_on_positional_rows():
    rows = [Row("k", 4), Row("k", 9), Row("k", 2)]
    out = _fold(MaxAggregator(1), rows)
    assert isinstance(out, Row) and out == Row("k", 9) and out._fields is None
    assert _fold(MinByAggregator(1), rows) is rows[2]


def test_sum_on_lists_does_not_mutate_the_inputs():
    a, b = ["k", 1], ["k", 2]
    assert SumAggregator(1).reduce(a, b) == ["k", 3]
    assert a == ["k", 1]


@pytest.mark.parametrize(
    ("agg", "expected"),
    [(SumAggregator(), 9), (MinAggregator(), 1), (MaxAggregator(), 5), (MinByAggregator(), 1), (MaxByAggregator(), 5)],
)
def test_scalars(agg, expected):
    assert _fold(agg, [3, 1, 5]) == expected


def test_sum_of_floats():
    assert _fold(SumAggregator(0), [0.5, 0.25]) == 0.75


@pytest.mark.parametrize("cls", [SumAggregator, MinAggregator, MaxAggregator, MinByAggregator, MaxByAggregator])
def test_a_scalar_has_no_position_above_zero(cls):
    with pytest.raises(TypeError):
        cls(1).reduce(1, 2)
