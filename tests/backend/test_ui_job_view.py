"""The job page's pure view models: timeline segments, exceptions, configuration, throughput history."""
from __future__ import annotations

from millstream.backend.ui.job_view import configuration_tab, exceptions_tab, timeline_segments
from millstream.backend.ui.throughput import ThroughputHistory
from millstream.engine.jobmanager.job_store import ExceptionRecord, JobRecord


def test_timeline_segments_run_from_each_state_to_the_next_and_the_current_one_to_now() -> None:
    ts = {"CREATED": 1000, "SCHEDULED": 1100, "DEPLOYING": 1200, "RUNNING": 1500, "FINISHED": 0}
    segs = timeline_segments(ts, "RUNNING", now=2000, span=(1000, 2000))
    assert [(s.state, s.start, s.end) for s in segs] == [
        ("CREATED", 1000, 1100), ("SCHEDULED", 1100, 1200), ("DEPLOYING", 1200, 1500), ("RUNNING", 1500, 2000)
    ]
    assert segs[0].left_pct == 0 and segs[-1].left_pct == 50 and segs[-1].width_pct == 50


def test_a_terminal_state_is_a_thin_marker_not_a_bar_to_now() -> None:
    segs = timeline_segments({"RUNNING": 1000, "CANCELED": 1500}, "CANCELED", now=9000, span=(1000, 2000))
    assert segs[-1].state == "CANCELED" and segs[-1].end == 1500 and segs[-1].width_pct < 1


def test_exceptions_carry_the_attempt_and_report_truncation() -> None:
    rows = [ExceptionRecord("j", 3000 - i, "ValueError", f"trace {i}", "Map", "v", 0, 2, "h", "tm-1") for i in range(3)]
    entries, truncated, root = exceptions_tab(rows, 2, None)
    assert [e.stacktrace for e in entries] == ["trace 0", "trace 1"] and truncated
    assert entries[0].attempt == 2 and entries[0].taskmanager == "tm-1" and root is None
    assert exceptions_tab([], 5, "the JobManager restarted") == ([], False, "the JobManager restarted")


def _record(rate: float, state: str = "RUNNING") -> JobRecord:
    sub = {"subtask": 0, "status": "RUNNING", "timestamps": {},
           "metrics": {"numRecordsInPerSecond": 0.0, "numRecordsOutPerSecond": rate}}
    sink = {"subtask": 0, "status": "RUNNING", "timestamps": {},
            "metrics": {"numRecordsInPerSecond": rate, "numRecordsOutPerSecond": 0.0}}
    return JobRecord("a" * 32, "j", state, "STREAMING", 0, vertices=[
        {"id": "src", "name": "Source", "parallelism": 1, "maxParallelism": 128, "status": "RUNNING", "tasks": {}, "subtasks": [sub]},
        {"id": "snk", "name": "Sink", "parallelism": 1, "maxParallelism": 128, "status": "RUNNING", "tasks": {}, "subtasks": [sink]},
    ])


def test_throughput_history_keeps_ten_minutes_one_sample_per_second() -> None:
    h = ThroughputHistory(window_ms=10_000)
    h.record(_record(5.0), 1000)
    h.record(_record(6.0), 1200)  # a second viewer a moment later: not a new point
    h.record(_record(7.0), 3000)
    h.record(_record(8.0), 12_500)  # pushes the first sample out of the window
    h.record(_record(9.0, "CANCELED"), 14_000)  # ended jobs are not sampled
    s = h.series("a" * 32, {"src": "Source", "snk": "Sink"})
    assert s["x"] == [3.0, 12.5]
    assert s["series"][0] == {"label": "Source (out)", "data": [7.0, 8.0]}
    assert s["series"][1] == {"label": "Sink (in)", "data": [7.0, 8.0]}  # sinks emit nothing: show what they take in
    assert h.series("b" * 32, {})["x"] == []


def test_configuration_lists_dotted_keys_and_flink_values_not_python_reprs() -> None:
    config = {
        "parallelism.default": 2,
        "execution.checkpointing": {"interval_ms": 500, "mode": "EXACTLY_ONCE", "unaligned": False, "storage": None},
        "restart-strategy": {"type": "fixed-delay", "attempts": 3, "delay_ms": 1000},
        "pipeline.jars": ["a.jar", "b.jar"],
        "pipeline.global-job-parameters": {},
    }
    record = JobRecord("j", "n", "RUNNING", "STREAMING", 0, job_graph={"config": config})
    raw = dict(configuration_tab(record)["raw"])
    assert raw["execution.checkpointing.interval_ms"] == "500"
    assert raw["execution.checkpointing.unaligned"] == "false"
    assert raw["execution.checkpointing.storage"] == "(none)"
    assert raw["restart-strategy.type"] == "fixed-delay" and raw["restart-strategy.attempts"] == "3"
    assert raw["pipeline.jars"] == "a.jar;b.jar" and raw["pipeline.global-job-parameters"] == "(empty)"
    assert not any(v.startswith(("{", "[", "(")) and v not in ("(none)", "(empty)") for v in raw.values()), raw
    assert configuration_tab(record)["execution"]["restart-strategy"].startswith("Restart with fixed delay (1000 ms)")


def test_a_batch_job_offers_only_the_tabs_that_mean_something_for_it() -> None:
    from millstream.backend.ui.job_view import tabs_for

    streaming = [t for t, _ in tabs_for("STREAMING")]
    assert "spark" not in streaming and {"checkpoints", "watermarks", "backpressure"} <= set(streaming)
    spark = [t for t, _ in tabs_for("BATCH", on_spark=True)]
    assert spark == ["graph", "subtasks", "spark", "exceptions", "timeline", "configuration"]
    native = [t for t, _ in tabs_for("BATCH", on_spark=False)]
    assert native == ["graph", "subtasks", "backpressure", "exceptions", "timeline", "throughput", "flamegraph", "configuration"]


def test_the_output_tab_is_offered_only_for_a_job_with_print_output() -> None:
    from millstream.backend.ui.job_view import tabs_for

    assert "output" not in dict(tabs_for("STREAMING")) and "output" not in dict(tabs_for("BATCH", on_spark=True))
    spark = [t for t, _ in tabs_for("BATCH", on_spark=True, has_output=True)]
    assert spark == ["graph", "subtasks", "spark", "exceptions", "output", "timeline", "configuration"]
    assert "output" in dict(tabs_for("STREAMING", has_output=True))
