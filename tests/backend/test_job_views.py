"""Flink's REST shapes built from hand-made JobRecords: live, finished and never scheduled."""
from __future__ import annotations

from typing import Any

import pytest

from millstream.backend.services import job_views
from millstream.backend.services.job_views import UnknownVertex
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.executiongraph.archived import archive_vertices
from millstream.engine.executiongraph.execution_graph import ExecutionGraph
from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from millstream.engine.jobmanager.job_store import ExceptionRecord, JobRecord

NOW = 10_000
TM_A, TM_B = "10.0.0.1:100-aaaaaa", "10.0.0.2:200-bbbbbb"
HOSTS = {TM_A: "worker-a", TM_B: "worker-b"}
# every subtask of the live job walks the lifecycle at these times
LIFECYCLE = {"CREATED": 1000, "SCHEDULED": 1500, "DEPLOYING": 2000, "INITIALIZING": 2500, "RUNNING": 3000}


def _job_graph():
    env = StreamExecutionEnvironment().set_parallelism(3)
    env.set_job_parameter("region", "eu")
    env.from_collection([1, 2, 3]).map(lambda x: x).key_by(lambda x: x).map(lambda x: x + 1).print()
    jg, _ = env.get_job_graph("views")
    return jg


JG = _job_graph()
SOURCE, MAP, SINK = (v.id for v in JG.vertices)


def _sample(bp: int, idle: int, busy: int, n: int, wm: int | None = None) -> dict[str, Any]:
    return {
        "read-records": n,
        "write-records": 2 * n,
        "read-bytes": 10 * n,
        "write-bytes": 20 * n,
        "idleTimeMsPerSecond": idle,
        "backPressuredTimeMsPerSecond": bp,
        "busyTimeMsPerSecond": busy,
        "accumulated-idle-time": idle * 5,
        "accumulated-backpressured-time": bp * 5,
        "accumulated-busy-time": busy * 5,
        "numRecordsInPerSecond": float(n),
        "currentInputWatermark": wm,
        "attempt": 0,
        "tm": TM_A,
        "slot": 0,
        "ts": 9_900 + n,
    }


def _subtask(i: int, status: str, tm: str | None, metrics: dict[str, Any] | None = None, **ts: int) -> dict[str, Any]:
    order = list(LIFECYCLE)
    reached = order[: order.index(status) + 1] if status in LIFECYCLE else order
    timestamps = {s: LIFECYCLE[s] for s in reached} | ts
    return {
        "subtask": i,
        "status": status,
        "attempt": 0,
        "taskmanager_id": tm,
        "slot": i if tm else None,
        "timestamps": timestamps,
        "failure": None,
        "metrics": metrics or {},
    }


def _vertex(vid: str, subtasks: list[dict[str, Any]]) -> dict[str, Any]:
    jv = JG.vertex(vid)
    counts = {s.value: 0 for s in ExecutionState}
    for st in subtasks:
        counts[st["status"]] += 1
    states = [st["status"] for st in subtasks]
    return {
        "id": vid,
        "name": jv.name,
        "parallelism": jv.parallelism,
        "maxParallelism": jv.max_parallelism,
        "status": job_views.aggregate_state(states),
        "tasks": counts,
        "subtasks": subtasks,
    }


def _record(state: str, vertices: list[dict[str, Any]], end: int = -1, **timestamps: int) -> JobRecord:
    return JobRecord(
        jid=JG.job_id,
        name="views",
        state=state,
        job_type="STREAMING",
        start_time=1000,
        end_time=end,
        last_modification=max(timestamps.values(), default=1000),
        job_graph=JG.to_dict(),
        timestamps={"CREATED": 1000, **timestamps},
        vertices=vertices,
    )


def live_record() -> JobRecord:
    return _record(
        "RUNNING",
        [
            _vertex(SOURCE, [_subtask(0, "RUNNING", TM_A, _sample(0, 990, 10, 3))]),
            _vertex(
                MAP,
                [
                    _subtask(0, "RUNNING", TM_A, _sample(50, 900, 50, 1, wm=500)),
                    _subtask(1, "RUNNING", TM_B, _sample(300, 600, 100, 2)),
                    _subtask(2, "RUNNING", TM_A, _sample(800, 0, 200, 3, wm=700)),
                ],
            ),
            _vertex(
                SINK,
                [
                    _subtask(0, "RUNNING", TM_A, _sample(0, 1000, 0, 1)),
                    _subtask(1, "RUNNING", TM_B, _sample(0, 1000, 0, 1)),
                    _subtask(2, "DEPLOYING", TM_A),  # deployed, no sample yet
                ],
            ),
        ],
        RUNNING=3000,
    )


def finished_record() -> JobRecord:
    def done(i: int, at: int, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
        return _subtask(i, "FINISHED", TM_B, metrics, FINISHED=at)

    return _record(
        "FINISHED",
        [
            _vertex(SOURCE, [done(0, 4000, _sample(0, 0, 1000, 3))]),
            _vertex(MAP, [done(0, 4500, _sample(0, 0, 0, 1)), done(1, 4600), done(2, 4700)]),
            _vertex(SINK, [done(0, 4800), done(1, 4900), done(2, 5000)]),
        ],
        end=5000,
        RUNNING=3000,
        FINISHED=5000,
    )


def never_scheduled_record() -> JobRecord:
    return _record("CREATED", [])


# -- jobs ---------------------------------------------------------------------------
def test_jobs_list_is_id_and_status():
    assert job_views.jobs_list([live_record()]) == {"jobs": [{"id": JG.job_id, "status": "RUNNING"}]}


def test_overview_of_a_running_job_has_no_end_and_lowercase_task_counts():
    (job,) = job_views.jobs_overview([live_record()], NOW)["jobs"]
    assert job == {
        "jid": JG.job_id,
        "name": "views",
        "state": "RUNNING",
        "start-time": 1000,
        "end-time": -1,
        "duration": NOW - 1000,
        "last-modification": 3000,
        "tasks": {
            "total": 7,
            "created": 0,
            "scheduled": 0,
            "deploying": 1,
            "initializing": 0,
            "running": 6,
            "finished": 0,
            "canceling": 0,
            "canceled": 0,
            "failed": 0,
        },
    }


def test_overview_of_a_finished_job_measures_to_its_end():
    (job,) = job_views.jobs_overview([finished_record()], NOW)["jobs"]
    assert (job["end-time"], job["duration"], job["tasks"]["finished"], job["tasks"]["total"]) == (5000, 4000, 7, 7)


def test_job_detail_of_a_running_job():
    d = job_views.job_detail(live_record(), NOW)
    head = ("jid", "isStoppable", "state", "job-type", "start-time", "end-time", "duration", "now")
    assert {k: d[k] for k in head} == {
        "jid": JG.job_id,
        "isStoppable": False,
        "state": "RUNNING",
        "job-type": "STREAMING",
        "start-time": 1000,
        "end-time": -1,
        "duration": 9000,
        "now": NOW,
    }
    assert d["maxParallelism"] == 128
    assert d["timestamps"] == {s.value: 0 for s in JobStatus} | {"CREATED": 1000, "RUNNING": 3000}
    assert d["status-counts"]["RUNNING"] == 6 and d["status-counts"]["DEPLOYING"] == 1
    assert [n["id"] for n in d["plan"]["nodes"]] == [SOURCE, MAP, SINK]

    source, map_, sink = d["vertices"]
    assert set(map_) == {
        "id", "name", "parallelism", "maxParallelism", "status",
        "start-time", "end-time", "duration", "tasks", "metrics",
    }
    assert (map_["status"], map_["start-time"], map_["end-time"], map_["duration"]) == ("RUNNING", 2000, -1, 8000)
    assert map_["metrics"] == {
        "read-bytes": 60,
        "read-bytes-complete": True,
        "write-bytes": 120,
        "write-bytes-complete": True,
        "read-records": 6,
        "read-records-complete": True,
        "write-records": 12,
        "write-records-complete": True,
        "accumulated-backpressured-time": 5 * (50 + 300 + 800),
        "accumulated-idle-time": 5 * (900 + 600),
        "accumulated-busy-time": 5 * (50 + 100 + 200),
    }
    # one live sink subtask has not reported yet: Flink marks the sums incomplete
    assert sink["status"] == "DEPLOYING"
    assert sink["metrics"]["read-records"] == 2 and sink["metrics"]["read-records-complete"] is False
    assert source["tasks"] == {s.value: 0 for s in ExecutionState} | {"RUNNING": 1}


def test_job_detail_of_a_finished_job_is_complete_and_ended():
    d = job_views.job_detail(finished_record(), NOW)
    assert (d["end-time"], d["duration"], d["timestamps"]["FINISHED"]) == (5000, 4000, 5000)
    _, map_, sink = d["vertices"]
    assert (sink["start-time"], sink["end-time"], sink["duration"]) == (2000, 5000, 3000)
    # two map subtasks left no sample, yet a terminal job's metrics are final
    assert map_["metrics"]["write-records"] == 2 and map_["metrics"]["write-records-complete"] is True


def test_a_never_scheduled_job_still_shows_its_graph_vertices():
    d = job_views.job_detail(never_scheduled_record(), NOW)
    assert [v["id"] for v in d["vertices"]] == [SOURCE, MAP, SINK]
    map_ = d["vertices"][1]
    assert (map_["name"], map_["parallelism"], map_["status"]) == ("Map", 3, "CREATED")
    assert set(map_["tasks"].values()) == {0} and set(d["status-counts"].values()) == {0}
    assert (map_["start-time"], map_["end-time"], map_["duration"]) == (-1, -1, -1)
    (job,) = job_views.jobs_overview([never_scheduled_record()], NOW)["jobs"]
    assert job["tasks"]["total"] == 0 and job["end-time"] == -1
    assert job_views.vertex_detail(never_scheduled_record(), MAP, NOW)["subtasks"] == []
    assert job_views.vertex_backpressure(never_scheduled_record(), MAP, NOW) == {"status": "deprecated"}


def test_job_detail_reads_a_real_archived_execution_graph():
    eg = ExecutionGraph.from_job_graph(JG, 1000)
    record = _record("CREATED", archive_vertices(eg, {}))
    d = job_views.job_detail(record, NOW)
    assert d["status-counts"]["CREATED"] == 7
    assert [v["status"] for v in d["vertices"]] == ["CREATED"] * 3
    sub = job_views.vertex_detail(record, SINK, NOW)["subtasks"][0]
    assert (sub["endpoint"], sub["taskmanager-id"], sub["start-time"], sub["duration"]) == (
        "(unassigned)", "(unassigned)", -1, -1
    )
    assert sub["status-duration"]["CREATED"] == NOW - 1000


# -- vertices -------------------------------------------------------------------------
def test_vertex_detail_subtasks():
    d = job_views.vertex_detail(live_record(), SINK, NOW, HOSTS)
    assert {k: d[k] for k in ("id", "name", "parallelism", "maxParallelism", "now")} == {
        "id": SINK, "name": "Map -> Sink: Print to Std. Out", "parallelism": 3, "maxParallelism": 128, "now": NOW
    }
    running, _, deploying = d["subtasks"]
    assert {k: running[k] for k in running if k not in ("metrics", "status-duration")} == {
        "subtask": 0,
        "status": "RUNNING",
        "attempt": 0,
        "endpoint": "worker-a",
        "start-time": 2000,
        "end-time": -1,
        "duration": 8000,
        "taskmanager-id": TM_A,
    }
    assert running["status-duration"] == {
        "CREATED": 500, "SCHEDULED": 500, "DEPLOYING": 500, "INITIALIZING": 500, "RUNNING": NOW - 3000
    }
    assert deploying["status-duration"] == {
        "CREATED": 500, "SCHEDULED": 500, "DEPLOYING": NOW - 2000, "INITIALIZING": -1, "RUNNING": -1
    }
    assert running["metrics"]["read-records"] == 1 and deploying["metrics"]["read-records-complete"] is False
    # without a host map the endpoint is the host part of the TaskManager id
    assert job_views.vertex_detail(live_record(), SINK, NOW)["subtasks"][1]["endpoint"] == "10.0.0.2"


def test_finished_subtask_times():
    sub = job_views.vertex_detail(finished_record(), SINK, NOW)["subtasks"][2]
    assert (sub["start-time"], sub["end-time"], sub["duration"]) == (2000, 5000, 3000)
    assert sub["status-duration"]["RUNNING"] == 5000 - 3000


def test_unknown_vertex_raises():
    with pytest.raises(UnknownVertex):
        job_views.vertex_detail(live_record(), "0" * 32, NOW)


def test_backpressure_levels_at_flink_thresholds():
    bp = job_views.vertex_backpressure(live_record(), MAP, NOW)
    assert bp["status"] == "ok"
    assert bp["backpressure-level"] == bp["backpressureLevel"] == "high"  # the worst subtask's
    assert bp["end-timestamp"] == 9_903
    def entry(i: int, level: str, ratio: float, idle: float, busy: float) -> dict[str, Any]:
        return {
            "subtask": i, "attempt-number": 0, "backpressure-level": level,
            "ratio": ratio, "idleRatio": idle, "busyRatio": busy,
        }

    assert bp["subtasks"] == [
        entry(0, "ok", 0.05, 0.9, 0.05),
        entry(1, "low", 0.3, 0.6, 0.1),
        entry(2, "high", 0.8, 0.0, 0.2),
    ]
    assert job_views.vertex_backpressure(live_record(), SOURCE, NOW)["backpressure-level"] == "ok"


def test_subtasktimes():
    d = job_views.vertex_subtasktimes(finished_record(), SINK, NOW, HOSTS)
    assert (d["id"], d["now"]) == (SINK, NOW)
    first = d["subtasks"][0]
    assert (first["subtask"], first["endpoint"], first["duration"]) == (0, "worker-b", 4800 - 1000)
    assert first["timestamps"] == {s.value: 0 for s in ExecutionState} | LIFECYCLE | {"FINISHED": 4800}


def test_taskmanagers_groups_subtasks_by_taskmanager():
    d = job_views.vertex_taskmanagers(live_record(), MAP, NOW, HOSTS)
    a, b = d["taskmanagers"]
    assert (a["taskmanager-id"], a["endpoint"], a["status"]) == (TM_A, "worker-a", "RUNNING")
    assert a["status-counts"]["RUNNING"] == 2 and b["status-counts"]["RUNNING"] == 1
    assert a["metrics"]["read-records"] == 1 + 3 and b["metrics"]["read-records"] == 2
    assert (a["start-time"], a["end-time"], a["duration"]) == (2000, -1, 8000)


def test_watermarks_only_for_subtasks_that_have_one():
    assert job_views.vertex_watermarks(live_record(), MAP) == [
        {"id": "0.currentInputWatermark", "value": "500"},
        {"id": "2.currentInputWatermark", "value": "700"},
    ]
    assert job_views.vertex_watermarks(live_record(), SOURCE) == []


def test_subtask_metric_aggregation():
    rec = live_record()
    assert job_views.subtask_metrics_aggregate(rec, MAP, ["read-records", "no-such-metric"], ["min", "max"]) == [
        {"id": "read-records", "min": 1.0, "max": 3.0}
    ]
    assert job_views.subtask_metrics_aggregate(rec, MAP, ["busyTimeMsPerSecond"], []) == [
        {"id": "busyTimeMsPerSecond", "min": 50.0, "max": 200.0, "avg": 350 / 3, "sum": 350.0,
         "skew": pytest.approx((350 / 3 - 50 + 200 - 350 / 3 + abs(100 - 350 / 3)) / 3 / (350 / 3) * 100)}
    ]
    # the sink subtask without a sample is left out rather than counted as 0
    assert job_views.subtask_metrics_aggregate(rec, SINK, ["read-records"], ["avg", "sum"]) == [
        {"id": "read-records", "avg": 1.0, "sum": 2.0}
    ]
    names = [m["id"] for m in job_views.subtask_metrics_aggregate(rec, MAP, [])]
    assert "busyTimeMsPerSecond" in names and "currentInputWatermark" in names and "ts" not in names
    with pytest.raises(ValueError):
        job_views.subtask_metrics_aggregate(rec, MAP, ["read-records"], ["median"])


# -- exceptions, config, result ----------------------------------------------------------
def _exc(ts: int, name: str) -> ExceptionRecord:
    return ExceptionRecord(
        JG.job_id, ts, name, f"Traceback ...\n{name}: boom {ts}", task_name="Map (2/3)",
        vertex_id=MAP, subtask=1, attempt=0, endpoint=TM_B, taskmanager_id=TM_B,
    )


def test_exception_history_is_truncated_to_the_limit():
    records = [_exc(3000, "ValueError"), _exc(2000, "KeyError"), _exc(1000, "TypeError")]
    out = job_views.exceptions(records, 2)
    assert out["exceptionHistory"]["truncated"] is True and out["truncated"] is True
    assert out["exceptionHistory"]["entries"][0] == {
        "exceptionName": "ValueError",
        "stacktrace": "Traceback ...\nValueError: boom 3000",
        "timestamp": 3000,
        "taskName": "Map (2/3)",
        "endpoint": TM_B,
        "taskManagerId": TM_B,
        "failureLabels": {},
        "concurrentExceptions": [],
    }
    assert len(out["all-exceptions"]) == 2 and out["all-exceptions"][1]["exception"].endswith("boom 2000")
    assert (out["root-exception"], out["timestamp"]) == ("Traceback ...\nValueError: boom 3000", 3000)
    assert job_views.exceptions(records, 3)["truncated"] is False


def test_without_exceptions_the_failure_cause_is_the_root():
    out = job_views.exceptions([], 10, "the JobManager restarted")
    assert out["exceptionHistory"] == {"entries": [], "truncated": False}
    assert out["root-exception"] == "the JobManager restarted"


def test_job_config_comes_from_the_job_graph():
    assert job_views.job_config(live_record()) == {
        "jid": JG.job_id,
        "name": "views",
        "execution-config": {
            "execution-mode": "PIPELINED",
            "restart-strategy": "Restart deactivated.",
            "job-parallelism": 3,
            "object-reuse-mode": False,
            "user-config": {"region": "eu"},
        },
    }


def test_job_config_names_the_restart_strategy_in_effect():
    """A checkpointed job without a strategy restarts with Flink's fixed-delay fallback, and says so."""
    record = live_record()
    config = record.job_graph.setdefault("config", {})
    config["execution.checkpointing"] = {"interval_ms": 1000}
    assert job_views.job_config(record)["execution-config"]["restart-strategy"].startswith("Restart with fixed delay")
    config["restart-strategy"] = {"type": "failure-rate", "max_failures_per_interval": 2, "failure_interval_ms": 60000, "delay_ms": 500}
    assert job_views.job_config(record)["execution-config"]["restart-strategy"] == (
        "Failure rate restart with maximum of 2 failures within interval 60000 ms and fixed delay 500 ms."
    )


def test_execution_result():
    assert job_views.execution_result(live_record()) == {"status": {"id": "IN_PROGRESS"}}
    assert job_views.execution_result(finished_record()) == {
        "status": {"id": "COMPLETED"},
        "job-execution-result": {
            "id": JG.job_id, "application-status": "SUCCEEDED", "accumulator-results": {}, "net-runtime": 4000
        },
    }
    failed = finished_record()
    failed.state = "FAILED"
    result = job_views.execution_result(failed, _exc(4000, "ValueError"))["job-execution-result"]
    assert result["application-status"] == "FAILED"
    assert result["failure"] == {"class": "ValueError", "stack-trace": "Traceback ...\nValueError: boom 4000"}
