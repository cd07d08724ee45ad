"""Flink's metric-query answers: values, aggregations and subtask selections (pure)."""
from __future__ import annotations

import pytest

from millstream.backend.services.metric_aggregation import aggregate, parse_subtasks, skew, values_answer


def test_values_answer_lists_or_picks_as_strings() -> None:
    values = {"b": 2, "a": 1.5, "none": None}
    assert values_answer(values, []) == [{"id": "a"}, {"id": "b"}]
    assert values_answer(values, ["b", "missing", "b"]) == [{"id": "b", "value": "2"}]


def test_aggregate_only_the_requested_aggregations() -> None:
    samples = [{"x": 1, "t": "text"}, {"x": 3}, {}]
    assert aggregate(samples, []) == [{"id": "x"}]
    assert aggregate(samples, ["x", "t"], ["max", "avg"]) == [{"id": "x", "max": 3.0, "avg": 2.0}]
    assert aggregate(samples, ["x"]) == [{"id": "x", "min": 1.0, "max": 3.0, "avg": 2.0, "sum": 4.0, "skew": 50.0}]
    assert aggregate(samples, ["x"], ["SKEW"]) == [{"id": "x", "skew": 50.0}]  # names in any case, as Flink's
    with pytest.raises(ValueError, match="median"):
        aggregate(samples, ["x"], ["median"])


def test_subtask_selection_takes_indices_and_ranges() -> None:
    assert parse_subtasks(None) is None and parse_subtasks(" ") is None
    assert parse_subtasks("0,2-4, 7") == {0, 2, 3, 4, 7}
    for bad in ("a", "3-1", "-1", "0-99999999"):
        with pytest.raises(ValueError):
            parse_subtasks(bad)


def test_skew_as_flink_computes_it() -> None:
    assert skew([], 0.0) == 0.0 and skew([5.0], 5.0) == 0.0 and skew([0.0, 0.0], 0.0) == 0.0
    assert skew([1.0, 1.0, 4.0], 2.0) == pytest.approx(200 / 3)  # mean |dev| 4/3 over mean 2
    assert skew([0.0, 0.0, 0.0, 100.0], 25.0) == 100.0  # capped
