"""A real Prometheus for tests: Debian's ``prometheus`` binary, run with a temporary config (never as a
service) that finds the module's cluster through HTTP service discovery at ``/metrics/targets`` and
scrapes it every second. Shared by the tests that query it (``test_prometheus_*.py``)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.integration.cluster import Cluster, free_port

PROMETHEUS = shutil.which("prometheus")

#: Put on a test module (``pytestmark = requires_prometheus``): the one reason such a test skips.
requires_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="the prometheus binary is not installed (apt-get install prometheus; make system-deps)"
)

SCRAPE_INTERVAL_S = 1

CONFIG = f"""\
global:
  scrape_interval: {SCRAPE_INTERVAL_S}s
  scrape_timeout: 1s
scrape_configs:
  - job_name: millstream
    http_sd_configs:
      - url: {{url}}/metrics/targets
        refresh_interval: 1s
"""


@pytest.fixture
def prometheus(cluster: Cluster, tmp_path: Path) -> Iterator[httpx.Client]:
    """A client for the running Prometheus's HTTP API."""
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


def wait_targets_up(cluster: Cluster, prometheus: httpx.Client, count: int) -> list[dict[str, Any]]:
    """Until Prometheus has discovered ``count`` endpoints and scraped each of them; its active targets."""
    def targets_up() -> bool:
        active = prometheus.get("/api/v1/targets").json()["data"]["activeTargets"]
        return len(active) == count and all(t["health"] == "up" for t in active)

    cluster.wait_for(targets_up, 60, f"Prometheus to discover and scrape {count} endpoints")
    return prometheus.get("/api/v1/targets").json()["data"]["activeTargets"]
