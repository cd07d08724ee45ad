"""Built-in keyed aggregations: sum/min/max/min_by/max_by on tuples, Rows, lists and scalars."""
from __future__ import annotations

from functools import reduce

import pytest

from millstream.engine.common.row import Row
from millstream.engine.datastream.aggregators import (
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
    assert isinstance(out, Row) and out == Row("k", 9) and getattr(out, "_fields", None) is None
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


# -- by field name (Rows with names), as PyFlink's sum("field") -----------------------------------


def _named(word, count, score):
    return Row(word=word, count=count, score=score)


def test_aggregations_by_field_name_on_named_rows():
    rows = [_named("a", 1, 5), _named("a", 4, 1), _named("a", 2, 9)]
    assert _fold(SumAggregator("count"), rows) == _named("a", 7, 5)
    assert _fold(MinAggregator("score"), rows) == _named("a", 1, 1)
    assert _fold(MaxAggregator("score"), rows) == _named("a", 1, 9)
    assert _fold(MinByAggregator("score"), rows) == _named("a", 4, 1)
    assert _fold(MaxByAggregator("score"), rows) == _named("a", 2, 9)
    # The result keeps its field names, so a later aggregation by name still works.
    assert _fold(SumAggregator("count"), rows).count == 7


def test_field_name_errors_say_what_is_wrong():
    with pytest.raises(KeyError, match="'nope' is not a field"):
        SumAggregator("nope").reduce(_named("a", 1, 1), _named("a", 2, 2))
    with pytest.raises(TypeError, match="needs Rows with field names"):
        SumAggregator("count").reduce(("a", 1), ("a", 2))
    with pytest.raises(TypeError, match="position .* or a field name"):
        SumAggregator(1.5)
    with pytest.raises(ValueError, match="must not be negative"):
        SumAggregator(-1)


def test_keyed_sum_by_field_name_on_a_real_run():
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    rows = [_named("a", 1, 5), _named("b", 2, 3), _named("a", 4, 1)]
    keyed = env.from_collection(rows).key_by(lambda r: r.word)
    out = keyed.sum("count").union(keyed.max_by("score").map(lambda r: ("max_by", r.word, r.score)))
    got = sorted(out.execute_and_collect(), key=repr)
    assert got == sorted(
        [_named("a", 1, 5), _named("b", 2, 3), _named("a", 5, 5), ("max_by", "a", 5), ("max_by", "b", 3), ("max_by", "a", 5)],
        key=repr,
    )
