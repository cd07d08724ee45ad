"""Prometheus itself (Debian's binary, run here with a temporary config, never as a service) finds the
cluster's endpoints through HTTP service discovery at ``/metrics/targets``, scrapes the JobManager and
every TaskManager while a job runs, and answers a query for ``flink_taskmanager_job_task_numRecordsIn``
with the job's labels as Flink's reporter sets them."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.cluster import Cluster, free_port

PROGRAMS = Path(__file__).parent / "programs"
PROMETHEUS = shutil.which("prometheus")

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="the prometheus binary is not installed (apt-get install prometheus; make system-deps)"
)

CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: millstream
    http_sd_configs:
      - url: {url}/metrics/targets
        refresh_interval: 1s
"""


@pytest.fixture
def prometheus(cluster: Cluster, tmp_path: Path) -> Any:
    (tmp_path / "prometheus.yml").write_text(CONFIG.format(url=cluster.url))
    port = free_port()
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    try:
        cluster.wait_for(lambda: _ready(api), 60, "Prometheus to start")
        yield api
    finally:
        api.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _ready(api: httpx.Client) -> bool:
    try:
        return api.get("/-/ready").status_code == 200
    except httpx.HTTPError:
        return False


def test_prometheus_scrapes_the_cluster_through_http_service_discovery(cluster: Cluster, prometheus: httpx.Client) -> None:
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "metered.py", options=("-p", "2", "--detached"))
    jid = cluster.wait_new_job(known)
    try:
        cluster.wait_running(jid)

        def targets_up() -> bool:
            active = prometheus.get("/api/v1/targets").json()["data"]["activeTargets"]
            return len(active) == 3 and all(t["health"] == "up" for t in active)  # the JobManager and 2 TaskManagers

        cluster.wait_for(targets_up, 60, "Prometheus to discover and scrape the JobManager and both TaskManagers")
        active = prometheus.get("/api/v1/targets").json()["data"]["activeTargets"]
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
