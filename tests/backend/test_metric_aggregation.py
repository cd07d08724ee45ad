"""Flink's metric-query answers: values, aggregations and subtask selections (pure)."""
from __future__ import annotations

import pytest

from backend.services.metric_aggregation import aggregate, parse_subtasks, values_answer


def test_values_answer_lists_or_picks_as_strings() -> None:
    values = {"b": 2, "a": 1.5, "none": None}
    assert values_answer(values, []) == [{"id": "a"}, {"id": "b"}]
    assert values_answer(values, ["b", "missing", "b"]) == [{"id": "b", "value": "2"}]


def test_aggregate_only_the_requested_aggregations() -> None:
    samples = [{"x": 1, "t": "text"}, {"x": 3}, {}]
    assert aggregate(samples, []) == [{"id": "x"}]
    assert aggregate(samples, ["x", "t"], ["max", "avg"]) == [{"id": "x", "max": 3.0, "avg": 2.0}]
    assert aggregate(samples, ["x"]) == [{"id": "x", "min": 1.0, "max": 3.0, "avg": 2.0, "sum": 4.0}]
    with pytest.raises(ValueError, match="median"):
        aggregate(samples, ["x"], ["median"])


def test_subtask_selection_takes_indices_and_ranges() -> None:
    assert parse_subtasks(None) is None and parse_subtasks(" ") is None
    assert parse_subtasks("0,2-4, 7") == {0, 2, 3, 4, 7}
    for bad in ("a", "3-1", "-1", "0-99999999"):
        with pytest.raises(ValueError):
            parse_subtasks(bad)
