"""Prometheus itself (Debian's binary, run here with a temporary config, never as a service) finds the
cluster's endpoints through HTTP service discovery at ``/metrics/targets``, scrapes the JobManager and
every TaskManager while a job runs, and answers a query for ``flink_taskmanager_job_task_numRecordsIn``
with the job's labels as Flink's reporter sets them."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.integration.cluster import Cluster
from tests.integration.prometheus_server import prometheus, requires_prometheus, wait_targets_up  # noqa: F401 (a fixture)

PROGRAMS = Path(__file__).parent / "programs"

pytestmark = requires_prometheus


def test_prometheus_scrapes_the_cluster_through_http_service_discovery(cluster: Cluster, prometheus: httpx.Client) -> None:
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "metered.py", options=("-p", "2", "--detached"))
    jid = cluster.wait_new_job(known)
    try:
        cluster.wait_running(jid)
        active = wait_targets_up(cluster, prometheus, 3)  # the JobManager and 2 TaskManagers
        assert sorted(t["labels"]["component"] for t in active) == ["jobmanager", "taskmanager", "taskmanager"]

        found: list[dict[str, Any]] = []

        def records_in() -> bool:
            query = f'flink_taskmanager_job_task_numRecordsIn{{job_id="{jid}"}}'
            body = prometheus.get("/api/v1/query", params={"query": query}).json()
            assert body["status"] == "success", body
            found[:] = body["data"]["result"]
            maps = [r for r in found if "Map" in r["metric"]["task_name"]]
            return len(maps) == 2 and all(float(r["value"][1]) > 0 for r in maps)

        cluster.wait_for(records_in, 60, "Prometheus to hold the map subtasks' numRecordsIn")
        maps = [r["metric"] for r in found if "Map" in r["metric"]["task_name"]]
        assert sorted(m["subtask_index"] for m in maps) == ["0", "1"]
        for m in maps:
            assert m["job_name"] == "metered" and m["job_id"] == jid and m["tm_id"] and m["task_attempt_num"] == "0"
            assert m["job"] == "millstream" and m["component"] == "taskmanager"
        # The count grows in Prometheus as the job runs: it is scraped, not read once.
        first = sum(float(r["value"][1]) for r in found if "Map" in r["metric"]["task_name"])
        time.sleep(3)
        assert records_in()
        assert sum(float(r["value"][1]) for r in found if "Map" in r["metric"]["task_name"]) > first
        # The JobManager's own series is there too, with the job's uptime.
        up = prometheus.get("/api/v1/query", params={"query": f'flink_jobmanager_job_uptime{{job_id="{jid}"}}'}).json()
        assert up["data"]["result"] and float(up["data"]["result"][0]["value"][1]) > 0
    finally:
        cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
        cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"))
        run.wait(60)
