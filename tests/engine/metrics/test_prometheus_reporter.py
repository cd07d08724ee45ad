"""Flink's reporter naming and labels, from plain values to Prometheus text (no servers)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from millstream.engine.metrics.groups import MetricRegistry, UserMetricValue
from millstream.engine.metrics.prometheus_reporter import jobmanager_families, metric_name, sanitize, task_families
from millstream.engine.metrics.task_report import TaskMetricsReport


class _Fixed:
    def __init__(self, families) -> None:
        self.families = families

    def collect(self):
        return iter(self.families)


def _text(families) -> dict[str, list]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    return {f.name: f.samples for f in text_string_to_metric_families(generate_latest(registry).decode())}


def test_names_replace_characters_outside_prometheus_alphabet() -> None:
    assert sanitize("my-group.events rate") == "my_group_events_rate"
    assert metric_name(("taskmanager", "job", "task", "operator"), "my group", "n.1") == (
        "flink_taskmanager_job_task_operator_my_group_n_1"
    )


def test_jobmanager_and_job_families() -> None:
    out = _text(jobmanager_families(
        {"numRegisteredTaskManagers": 2, "taskSlotsTotal": 4},
        [("a" * 32, "wordcount", {"numRestarts": 1, "uptime": 1500})],
        "jm-host",
    ))
    assert out["flink_jobmanager_numRegisteredTaskManagers"][0].labels == {"host": "jm_host"}  # values filtered as Flink's
    assert out["flink_jobmanager_taskSlotsTotal"][0].value == 4
    sample = out["flink_jobmanager_job_uptime"][0]
    assert sample.labels == {"job_id": "a" * 32, "job_name": "wordcount", "host": "jm_host"}
    assert sample.value == 1500


def _report(**kw) -> TaskMetricsReport:
    base = dict(job_id="j" * 32, job_name="job", vertex_id="v" * 32, task_name="Source: s -> Map", subtask=1, attempt=2)
    return TaskMetricsReport(**{**base, **kw})


def test_task_figures_under_flink_names_with_task_labels() -> None:
    r = _report(figures={"read-records": 10, "write-records": 7, "busyTimeMsPerSecond": 300, "currentInputWatermark": None})
    out = _text(task_families([r], "tm-1", "host-1"))
    s = out["flink_taskmanager_job_task_numRecordsIn"][0]
    assert s.value == 10
    assert s.labels == {
        "job_id": "j" * 32, "job_name": "job", "task_id": "v" * 32, "task_name": "Source:_s____Map",
        "task_attempt_id": f"{'j' * 32}_{'v' * 32}_1_2", "task_attempt_num": "2", "subtask_index": "1",
        "tm_id": "tm_1", "host": "host_1",
    }
    # Another attempt of the same subtask is another series, as a new ExecutionAttemptID is in Flink.
    again = _text(task_families([_report(attempt=3, figures={"read-records": 1})], "tm-1", "host-1"))
    assert again["flink_taskmanager_job_task_numRecordsIn"][0].labels["task_attempt_id"] == f"{'j' * 32}_{'v' * 32}_1_3"
    assert out["flink_taskmanager_job_task_numRecordsOut"][0].value == 7
    assert out["flink_taskmanager_job_task_busyTimeMsPerSecond"][0].value == 300
    assert "flink_taskmanager_job_task_currentInputWatermark" not in out  # no watermark yet: not reported


def test_user_metrics_are_operator_scoped_and_keep_dotted_operator_names() -> None:
    registry = MetricRegistry()
    group = registry.operator_group("parse.v2").add_group("my-group")
    group.counter("events").inc(3)
    group.meter("rate")
    group.gauge("last", lambda: 42)
    group.gauge("label", lambda: "text")  # text has no Prometheus value
    dist = group.distribution("sizes")
    for v in (5, 1, 9):
        dist.update(v)
    r = _report(user_metrics=tuple(registry.snapshot()), late_dropped_by_operator=(("Window", 4),),
                operator_ids=(("parse.v2", "a" * 32), ("Window", "b" * 32)))
    out = _text(task_families([r], "tm-1", "h"))
    events = out["flink_taskmanager_job_task_operator_my_group_events"][0]
    assert events.value == 3 and events.labels["operator_name"] == "parse_v2"
    assert events.labels["operator_id"] == "a" * 32  # found by the unfiltered name
    assert events.labels["task_attempt_id"] == f"{'j' * 32}_{'v' * 32}_1_2"
    assert out["flink_taskmanager_job_task_operator_my_group_last"][0].value == 42
    assert "flink_taskmanager_job_task_operator_my_group_rate" in out
    assert not any("label" in name for name in out)
    sizes = {s.name: s.value for s in out["flink_taskmanager_job_task_operator_my_group_sizes"]}
    assert sizes == {
        "flink_taskmanager_job_task_operator_my_group_sizes_count": 3,
        "flink_taskmanager_job_task_operator_my_group_sizes_sum": 15,
    }
    assert out["flink_taskmanager_job_task_operator_my_group_sizes_min"][0].value == 1
    assert out["flink_taskmanager_job_task_operator_my_group_sizes_max"][0].value == 9
    late = out["flink_taskmanager_job_task_operator_numLateRecordsDropped"][0]
    assert late.value == 4 and late.labels["operator_name"] == "Window" and late.labels["operator_id"] == "b" * 32


def test_key_value_groups_become_labels_as_in_flink() -> None:
    registry = MetricRegistry()
    group = registry.operator_group("Map").add_group("my_group")
    group.add_group("kind", "even").counter("values").inc(2)
    group.add_group("kind", "odd").counter("values").inc(5)
    group.add_group("job_id", "x").counter("shadow").inc()  # would shadow a scope label: left out
    assert registry.report() == {"Map.my_group.kind.even.values": 2, "Map.my_group.kind.odd.values": 5,
                                 "Map.my_group.job_id.x.shadow": 1}  # REST ids keep every name
    out = _text(task_families([_report(user_metrics=tuple(registry.snapshot()))], "tm", "h"))
    values = {s.labels["kind"]: s.value for s in out["flink_taskmanager_job_task_operator_my_group_kind_values"]}
    assert values == {"even": 2, "odd": 5}
    shadow = out["flink_taskmanager_job_task_operator_my_group_job_id_shadow"][0]
    assert shadow.labels["job_id"] == "j" * 32


def test_a_name_clash_of_kinds_keeps_one_valid_family() -> None:
    clash = UserMetricValue("Map.x", ("Map", "x"), "distribution", (1, 2, 2, 2))
    gauge = UserMetricValue("Map.x.count", ("Map", "x", "count"), "counter", 5)  # ..._x_count, the summary's sample
    out = _text(task_families([_report(user_metrics=(gauge, clash))], "tm", "h"))  # the parser accepts it
    assert "flink_taskmanager_job_task_operator_x_count" in out


def test_rest_values_of_user_metrics_are_unchanged() -> None:
    registry = MetricRegistry()
    g = registry.operator_group("Map")
    g.counter("c").inc()
    g.distribution("d").update(4)
    assert registry.report() == {"Map.c": 1, "Map.d": "DistributionResult{sum=4, count=1, min=4, max=4}"}


def test_taskmanager_status_under_flink_names() -> None:
    out = _text(task_families([], "tm-1", "h", {"cpu_load": 0.25, "rss": 1000, "free_memory": 5, "ts": 1}))
    cpu = out["flink_taskmanager_Status_JVM_CPU_Load"][0]
    assert cpu.value == 0.25 and cpu.labels == {"host": "h", "tm_id": "tm_1"}
    assert out["flink_taskmanager_Status_ProcessTree_Memory_RSS"][0].value == 1000
    assert out["flink_taskmanager_System_Memory_Available"][0].value == 5
    assert _text(task_families([], "tm-1", "h", {})) == {}  # before the first heartbeat: nothing


def test_latency_histograms_are_job_scoped_summaries_with_flinks_quantiles() -> None:
    from millstream.engine.runtime.latency_markers import LatencyMarker, LatencyStats
    from millstream.engine.runtime.task_metrics import LATENCY_FIGURE

    stats = LatencyStats(["op 1"], subtask=1)
    for ms in range(1, 101):
        stats.report(LatencyMarker(0, "src", 0), ms)
    report = TaskMetricsReport("j1", "my job", "v1", "Map", 1, 0, {LATENCY_FIGURE: stats.snapshot()})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(task_families([report], "tm-1", "host-a")))
    text = generate_latest(registry).decode()
    [family] = [f for f in text_string_to_metric_families(text) if "latency" in f.name]
    assert family.name == "flink_taskmanager_job_latency_source_id_operator_id_operator_subtask_index_latency"
    assert family.type == "summary"
    by_quantile = {s.labels["quantile"]: s.value for s in family.samples if "quantile" in s.labels}
    assert set(by_quantile) == {"0.5", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert by_quantile["0.5"] == 50.5 and by_quantile["0.99"] == 99.99
    one = family.samples[0].labels
    assert (one["source_id"], one["operator_id"], one["operator_subtask_index"]) == ("src", "op_1", "1")
    assert (one["job_id"], one["job_name"], one["tm_id"]) == ("j1", "my_job", "tm-1".replace("-", "_"))
    counts = [s.value for s in family.samples if s.name.endswith("_count")]
    assert counts == [100.0]


def test_the_grafana_dashboard_uses_only_labels_the_reporter_writes() -> None:
    """Each panel's selectors, ``by (...)`` and legend name labels of its metric's scope: a label the
    reporter does not write would leave the panel empty without an error."""
    import json
    import re
    from pathlib import Path

    from millstream.engine.metrics import prometheus_reporter as pr

    dashboard = json.loads((Path(__file__).parents[3] / "monitoring/grafana/dashboards/millstream.json").read_text())
    scopes = [  # longest prefix first
        ("flink_taskmanager_job_task_operator_", pr.OPERATOR_LABELS), ("flink_taskmanager_job_task_", pr.TASK_LABELS),
        ("flink_jobmanager_job_", pr.JOB_LABELS), ("flink_taskmanager_", pr.TASKMANAGER_LABELS),
        ("flink_jobmanager_", pr.JOBMANAGER_LABELS),
    ]
    targets: list[dict] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "expr" in node:
                targets.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(dashboard)
    assert len(targets) >= 10
    for t in targets:
        expr, legend = t["expr"], t.get("legendFormat", "")
        [metric] = set(re.findall(r"flink_\w+", expr))
        allowed = next(labels for prefix, labels in scopes if metric.startswith(prefix))
        used = set(re.findall(r"(\w+)\s*=~?", expr)) | set(re.findall(r"\{\{(\w+)\}\}", legend))
        for group in re.findall(r"by \(([^)]*)\)", expr):
            used |= {g.strip() for g in group.split(",")}
        assert used <= set(allowed), (expr, legend, used - set(allowed))
