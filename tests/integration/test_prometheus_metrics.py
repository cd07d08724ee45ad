"""Prometheus endpoints on a real cluster: the JobManager's /metrics and /metrics/targets, and each
TaskManager's own endpoint, scraped with httpx and parsed with prometheus_client's parser while a
job with user metrics runs; plus Flink's REST metric queries on the same cluster."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"


def scrape(url: str, **kw: Any) -> dict[str, list[Any]]:
    """``{metric family name: [samples]}``; the parser refuses anything that is not Prometheus's format."""
    r = httpx.get(url, timeout=10, **kw)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(r.text)}


@pytest.fixture(scope="module")
def running_job(cluster: Cluster) -> Any:
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "metered.py", options=("-p", "2", "--detached"))
    jid = cluster.wait_new_job(known)
    cluster.wait_running(jid)
    yield jid
    cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"))
    run.wait(60)


def taskmanager_targets(cluster: Cluster) -> list[str]:
    targets = cluster.http.get("/metrics/targets").json()
    return [t for entry in targets if entry["labels"]["component"] == "taskmanager" for t in entry["targets"]]


def test_jobmanager_metrics_under_flinks_names(cluster: Cluster, running_job: str) -> None:
    families = scrape(f"{cluster.url}/metrics")
    value = {name: samples[0].value for name, samples in families.items() if len(samples) == 1}
    assert value["flink_jobmanager_numRegisteredTaskManagers"] == 2
    assert value["flink_jobmanager_taskSlotsTotal"] == 4
    assert value["flink_jobmanager_taskSlotsAvailable"] == 2  # the job holds 2 slots at parallelism 2
    assert value["flink_jobmanager_numRunningJobs"] >= 1
    uptime = [s for s in families["flink_jobmanager_job_uptime"] if s.labels["job_id"] == running_job]
    assert len(uptime) == 1 and uptime[0].labels["job_name"] == "metered" and uptime[0].labels["host"]
    assert uptime[0].value > 0
    restarts = [s for s in families["flink_jobmanager_job_numRestarts"] if s.labels["job_id"] == running_job]
    assert restarts[0].value == 0
    downtime = [s for s in families["flink_jobmanager_job_downtime"] if s.labels["job_id"] == running_job]
    assert downtime[0].value == 0
    time.sleep(1.1)
    later = scrape(f"{cluster.url}/metrics")["flink_jobmanager_job_uptime"]
    assert [s.value for s in later if s.labels["job_id"] == running_job][0] > uptime[0].value  # read at scrape time

    def completed() -> float:
        samples = scrape(f"{cluster.url}/metrics")["flink_jobmanager_job_numberOfCompletedCheckpoints"]
        return [s.value for s in samples if s.labels["job_id"] == running_job][0]

    first = completed()
    cluster.wait_for(lambda: completed() > max(first, 1), 30, "checkpoints to complete")
    families = scrape(f"{cluster.url}/metrics")
    mine = {n: [s.value for s in families[f"flink_jobmanager_job_{n}"] if s.labels["job_id"] == running_job][0]
            for n in ("lastCheckpointDuration", "lastCheckpointSize", "numberOfFailedCheckpoints")}
    assert mine["lastCheckpointDuration"] >= 0 and mine["lastCheckpointSize"] >= 0, mine


def test_targets_list_every_taskmanager_endpoint(cluster: Cluster, running_job: str) -> None:
    targets = cluster.http.get("/metrics/targets").json()
    assert {"targets": [f"127.0.0.1:{cluster.port}"], "labels": {"component": "jobmanager"}} in targets
    tms = taskmanager_targets(cluster)
    assert len(tms) == 2 and len(set(tms)) == 2
    assert all(t.startswith("127.0.0.1:") for t in tms)


def _task_samples(cluster: Cluster, name: str) -> list[Any]:
    out = []
    for target in taskmanager_targets(cluster):
        out += scrape(f"http://{target}/metrics").get(name, [])
    return out


def test_taskmanager_endpoints_report_task_and_operator_metrics(cluster: Cluster, running_job: str) -> None:
    cluster.wait_for(
        lambda: len([s for s in _task_samples(cluster, "flink_taskmanager_job_task_numRecordsIn")
                     if s.labels["job_id"] == running_job and s.value > 0]) >= 2,
        60, "records in on the map's subtasks",
    )
    records_in = [s for s in _task_samples(cluster, "flink_taskmanager_job_task_numRecordsIn") if s.labels["job_id"] == running_job]
    labels = records_in[0].labels
    assert set(labels) == {"job_id", "job_name", "task_id", "task_name", "task_attempt_id", "task_attempt_num",
                           "subtask_index", "tm_id", "host"}
    assert labels["job_name"] == "metered"
    # One id per execution attempt, as Flink's ExecutionAttemptID: job, vertex, subtask, attempt.
    assert {s.labels["task_attempt_id"] for s in records_in} == {
        f"{running_job}_{s.labels['task_id']}_{s.labels['subtask_index']}_{s.labels['task_attempt_num']}" for s in records_in
    }
    assert len({s.labels["task_attempt_id"] for s in records_in}) == len(records_in)
    # Label values are filtered as Flink's reporter does: "Map -> Filter -> Sink: ..." keeps [a-zA-Z0-9:_]
    assert any(s.labels["task_name"].startswith("Map____Filter") for s in records_in), records_in
    tm_ids = {s.labels["tm_id"] for s in records_in}
    assert len(tm_ids) == 2  # one subtask on each TaskManager (slots are spread)
    map_in = {s.labels["subtask_index"]: s.value for s in records_in if "Map" in s.labels["task_name"]}
    assert set(map_in) == {"0", "1"}

    for name in ("numRecordsOut", "numRecordsInPerSecond", "numRecordsOutPerSecond", "busyTimeMsPerSecond",
                 "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond"):
        assert [s for s in _task_samples(cluster, f"flink_taskmanager_job_task_{name}") if s.labels["job_id"] == running_job], name
    times = {
        n: sum(s.value for s in _task_samples(cluster, f"flink_taskmanager_job_task_{n}")
               if s.labels["job_id"] == running_job and s.labels["subtask_index"] == "0" and "Map" in s.labels["task_name"])
        for n in ("busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond")
    }
    assert 900 <= sum(times.values()) <= 1100, times  # each second is busy, idle or backpressured

    events = [s for s in _task_samples(cluster, "flink_taskmanager_job_task_operator_my_group_events") if s.labels["job_id"] == running_job]
    assert {s.labels["subtask_index"] for s in events} == {"0", "1"}
    assert all(s.labels["operator_name"] == "Map" for s in events)
    # The map heads its chain, and a vertex's id is its head operator's (32 hex digits, as in Flink).
    assert all(s.labels["operator_id"] == s.labels["task_id"] for s in events), events
    assert all(re.fullmatch(r"[0-9a-f]{32}", s.labels["operator_id"]) for s in events), events
    assert _task_samples(cluster, "flink_taskmanager_job_task_operator_my_group_last")
    assert _task_samples(cluster, "flink_taskmanager_job_task_operator_my_group_events_rate")
    dist = _task_samples(cluster, "flink_taskmanager_job_task_operator_my_group_values")
    assert {s.name for s in dist} >= {
        "flink_taskmanager_job_task_operator_my_group_values_count",
        "flink_taskmanager_job_task_operator_my_group_values_sum",
    }
    assert _task_samples(cluster, "flink_taskmanager_job_task_operator_my_group_values_max")

    cpu = _task_samples(cluster, "flink_taskmanager_Status_JVM_CPU_Load")
    assert len(cpu) == 2 and all(0.0 <= s.value <= 1.0 for s in cpu)

    time.sleep(2.5)  # the slots report every second: the numbers move between scrapes
    later = {s.labels["subtask_index"]: s.value for s in _task_samples(cluster, "flink_taskmanager_job_task_numRecordsIn")
             if s.labels["job_id"] == running_job and "Map" in s.labels["task_name"]}
    assert all(later[i] > map_in[i] for i in map_in), (map_in, later)


def test_rest_metric_queries(cluster: Cluster, running_job: str) -> None:
    http = cluster.http
    listed = {m["id"] for m in http.get("/jobmanager/metrics").json()}
    assert {"numRegisteredTaskManagers", "numRunningJobs", "taskSlotsTotal", "taskSlotsAvailable"} <= listed
    assert http.get("/jobmanager/metrics", params={"get": "taskSlotsTotal,nope"}).json() == [{"id": "taskSlotsTotal", "value": "4"}]

    job = http.get(f"/jobs/{running_job}/metrics", params={"get": "numRestarts,uptime"}).json()
    assert [m["id"] for m in job] == ["numRestarts", "uptime"] and job[0]["value"] == "0" and int(job[1]["value"]) > 0
    assert http.get("/jobs/0123456789abcdef0123456789abcdef/metrics").status_code == 404
    over_jobs = http.get("/jobs/metrics", params={"get": "numRestarts", "agg": "sum", "jobs": running_job}).json()
    assert over_jobs == [{"id": "numRestarts", "sum": 0.0}]

    tm_ids = [t["id"] for t in http.get("/taskmanagers").json()["taskmanagers"]]
    cluster.wait_for(lambda: http.get(f"/taskmanagers/{tm_ids[0]}/metrics").json() != [], 10, "a TaskManager's metrics")
    one = http.get(f"/taskmanagers/{tm_ids[0]}/metrics", params={"get": "Status.JVM.CPU.Load"}).json()
    assert one[0]["id"] == "Status.JVM.CPU.Load" and 0.0 <= float(one[0]["value"]) <= 1.0
    assert http.get("/taskmanagers/no-such-tm/metrics").status_code == 404
    agg = http.get("/taskmanagers/metrics", params={"get": "System.Memory.Available", "agg": "min,max"}).json()
    assert set(agg[0]) == {"id", "min", "max"} and agg[0]["min"] > 0
    only = http.get("/taskmanagers/metrics", params={"get": "Status.ProcessTree.Memory.RSS", "agg": "sum",
                                                    "taskmanagers": tm_ids[0]}).json()
    full = http.get("/taskmanagers/metrics", params={"get": "Status.ProcessTree.Memory.RSS", "agg": "sum"}).json()
    assert 0 < only[0]["sum"] < full[0]["sum"]
    assert http.get("/taskmanagers/metrics", params={"get": "x", "agg": "median"}).status_code == 400

    vid = next(v["id"] for v in cluster.job(running_job)["vertices"] if "Map" in v["name"])
    base = f"/jobs/{running_job}/vertices/{vid}/subtasks/metrics"
    both = http.get(base, params={"get": "read-records", "agg": "sum"}).json()[0]["sum"]
    first = http.get(base, params={"get": "read-records", "agg": "sum", "subtasks": "0"}).json()[0]["sum"]
    assert 0 < first < both
    assert http.get(base, params={"get": "read-records", "subtasks": "2-1"}).status_code == 400


def test_a_restart_counts_and_leaves_only_the_new_attempts_task_metrics(cluster: Cluster, running_job: str) -> None:
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "fails_once.py", options=("-p", "1", "--detached"))
    jid = cluster.wait_new_job(known)
    started = cluster.job(jid)["start-time"]
    try:
        def restarts() -> float:
            samples = scrape(f"{cluster.url}/metrics").get("flink_jobmanager_job_numRestarts", [])
            return next((s.value for s in samples if s.labels["job_id"] == jid), -1)

        cluster.wait_for(lambda: restarts() == 1 and cluster.job(jid)["state"] == "RUNNING", 60, "one restart")

        def attempts() -> set[str]:
            return {s.labels["task_attempt_num"] for s in _task_samples(cluster, "flink_taskmanager_job_task_numRecordsIn")
                    if s.labels["job_id"] == jid}

        cluster.wait_for(lambda: attempts() == {"1"}, 30, "the second attempt's tasks only")
        # A failover does not make the job look new: its start time is still the submission's.
        assert cluster.job(jid)["start-time"] == started > 0
        overview = cluster.http.get("/jobs/overview").json()["jobs"]
        assert [j["start-time"] for j in overview if j["jid"] == jid] == [started]
        listed = {m["id"] for m in cluster.http.get(f"/jobs/{jid}/metrics").json()}
        assert "numRestarts" in listed and "numberOfCompletedCheckpoints" not in listed  # it does not checkpoint
        assert cluster.http.get(f"/jobs/{jid}/metrics", params={"get": "numRestarts"}).json() == [
            {"id": "numRestarts", "value": "1"}
        ]
    finally:
        cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
        cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"))
        run.wait(60)
    # An ended job leaves the JobManager's job metrics and its tasks leave the TaskManagers' endpoints.
    cluster.wait_for(lambda: restarts() == -1, 10, "the ended job's metrics to go")
    cluster.wait_for(lambda: attempts() == set(), 10, "the ended job's task metrics to go")
    assert cluster.http.get(f"/jobs/{jid}/metrics").json() == []


def test_the_jobmanager_reports_its_own_cpu_and_memory(cluster: Cluster) -> None:
    import psutil

    assert cluster.jobmanager is not None
    proc = psutil.Process(cluster.jobmanager.pid)
    names = ("Status.JVM.CPU.Load", "Status.JVM.CPU.Time", "Status.ProcessTree.Memory.RSS", "Status.JVM.Threads.Count")
    listed = {m["id"] for m in cluster.http.get("/jobmanager/metrics").json()}
    assert set(names) <= listed
    before = {m["id"]: float(m["value"]) for m in cluster.http.get("/jobmanager/metrics", params={"get": ",".join(names)}).json()}
    cpu_before = sum(proc.cpu_times()[:2])
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:  # keep the JobManager busy answering
        cluster.http.get("/jobs/overview")
    after = {m["id"]: float(m["value"]) for m in cluster.http.get("/jobmanager/metrics", params={"get": ",".join(names)}).json()}
    cpu_used = sum(proc.cpu_times()[:2]) - cpu_before
    # Its own process: the CPU time moved as psutil sees it from outside, and the load is that share of the cores.
    assert after["Status.JVM.CPU.Time"] - before["Status.JVM.CPU.Time"] == pytest.approx(cpu_used * 1e9, rel=0.3, abs=2e8)
    assert 0 < after["Status.JVM.CPU.Load"] <= 1
    rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
    assert after["Status.ProcessTree.Memory.RSS"] == pytest.approx(rss, rel=0.2)
    assert after["Status.JVM.Threads.Count"] >= 2
    families = scrape(f"{cluster.url}/metrics")
    load = families["flink_jobmanager_Status_JVM_CPU_Load"]
    assert len(load) == 1 and load[0].labels == {"host": load[0].labels["host"]} and 0 <= load[0].value <= 1
    assert families["flink_jobmanager_Status_ProcessTree_Memory_RSS"][0].value > 10_000_000
