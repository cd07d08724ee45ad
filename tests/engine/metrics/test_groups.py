"""User metric groups and metrics: PyFlink's API, Flink's identifiers and MeterView's rate (pure core)."""
from __future__ import annotations

import pytest

from millstream.engine.metrics import Counter, Distribution, Meter, MetricGroup
from millstream.engine.metrics.groups import MeterView, MetricRegistry, UnregisteredMetricGroup
from millstream.engine.runtime.task_metrics import TaskIOMetrics


def test_identifiers_are_operator_groups_and_name_joined_by_dots() -> None:
    registry = MetricRegistry()
    group = registry.operator_group("Map")
    assert isinstance(group, MetricGroup)
    events = group.add_group("my_group").counter("events")
    assert isinstance(events, Counter)
    events.inc()
    events.inc(5)
    events.dec(2)
    assert events.get_count() == 4
    dist = group.add_group("user", "alice").distribution("sizes")
    assert isinstance(dist, Distribution)
    for v in (3, 1, 7):
        dist.update(v)
    group.gauge("answer", lambda: 42)
    report = registry.report(now=0.0)
    assert report["Map.my_group.events"] == 4
    assert report["Map.user.alice.sizes"] == "DistributionResult{sum=11, count=3, min=1, max=7}"
    assert report["Map.answer"] == 42


def test_a_name_registered_twice_is_the_same_metric_and_another_kind_is_refused() -> None:
    group = MetricRegistry().operator_group("Map")
    a = group.counter("n")
    assert group.counter("n") is a
    with pytest.raises(ValueError, match="already registered as a SimpleCounter"):
        group.meter("n")


def test_long_operator_names_are_cut_to_80_characters_as_flink_does() -> None:
    registry = MetricRegistry()
    registry.operator_group("x" * 100).counter("c")
    assert list(registry.report()) == ["x" * 80 + ".c"]


def test_meter_rate_counts_the_events_of_the_last_time_span() -> None:
    now = [1000.0]
    meter = MeterView(12, clock=lambda: now[0])
    assert isinstance(meter, Meter)
    assert meter.time_span_s == 10  # rounded down to Flink's 5 s update interval
    assert MeterView(3).time_span_s == 5
    meter.mark_event(20)
    now[0] += 5
    assert meter.get_rate(now[0]) == 2.0  # 20 events over the 10 s span, half of it elapsed
    meter.mark_event(30)
    now[0] += 6
    assert meter.get_rate(now[0]) == 5.0  # the span reaches back past the first sample: all 50
    now[0] += 5
    assert meter.get_rate(now[0]) == 3.0  # sampled 20 at 1005, now out of the span: 30 remain
    now[0] += 20
    assert meter.get_rate(now[0]) == 0.0
    assert meter.get_count() == 50


def test_a_gauge_that_raises_is_skipped_and_the_rest_reported() -> None:
    registry = MetricRegistry()
    group = registry.operator_group("Map")
    group.gauge("bad", lambda: 1 / 0)
    group.gauge("label", lambda: "text")
    group.counter("ok").inc()
    assert registry.report() == {"Map.label": "text", "Map.ok": 1}
    with pytest.raises(TypeError):
        group.gauge("not_callable", 3)  # type: ignore[arg-type]


def test_task_samples_carry_user_metrics_next_to_io_metrics() -> None:
    metrics = TaskIOMetrics()
    metrics.user_metrics.operator_group("Filter").counter("kept").inc(3)
    sample = metrics.sample()
    assert sample["Filter.kept"] == 3 and "numRecordsInPerSecond" in sample


def test_functions_without_a_reporting_task_still_get_working_metrics() -> None:
    group = UnregisteredMetricGroup()
    c = group.counter("c")
    c.inc()
    assert c.get_count() == 1


def test_pyflink_metrics_module_resolves_here() -> None:
    from millstream.engine.compat.pyflink_alias import install

    install()
    import pyflink.metrics as pm
    from pyflink.metrics.metricbase import MetricGroup as FromBase

    assert pm.MetricGroup is MetricGroup is FromBase
    assert {"MetricGroup", "Metric", "Counter", "Meter", "Distribution"} <= set(pm.__all__)
