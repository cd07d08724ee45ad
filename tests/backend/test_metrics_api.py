"""The JobManager's metrics routes on a real app with a real Redis and SQLite: Prometheus text,
scrape targets, Flink's REST metric answers without TaskManagers, and the read token."""
from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from millstream.backend.app import create_app
from millstream.backend.settings import Settings

TOKEN = "metrics-token"


def app_client(redis_url: str, tmp_path: Path, **overrides) -> TestClient:
    settings = Settings(redis_url=redis_url, data_dir=tmp_path, cluster_secret="test-secret", **overrides)
    return TestClient(create_app(settings))


def test_an_empty_cluster_reports_zeros(redis_url: str, tmp_path: Path) -> None:
    with app_client(redis_url, tmp_path) as api:
        r = api.get("/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        families = {f.name: f.samples for f in text_string_to_metric_families(r.text)}
        for name in ("numRegisteredTaskManagers", "numRunningJobs", "taskSlotsTotal", "taskSlotsAvailable"):
            assert families[f"flink_jobmanager_{name}"][0].value == 0
        assert api.get("/v1/metrics").status_code == 200
        assert api.get("/metrics/targets").json() == [{"targets": ["testserver"], "labels": {"component": "jobmanager"}}]
        assert api.get("/jobmanager/metrics", params={"get": "numRunningJobs"}).json() == [{"id": "numRunningJobs", "value": "0"}]
        assert api.get("/taskmanagers/metrics").json() == []
        assert api.get("/jobs/metrics", params={"get": "uptime"}).json() == []
        assert api.get("/jobs/not-a-job/metrics").status_code == 404


def test_metrics_need_the_token_when_reads_do(redis_url: str, tmp_path: Path) -> None:
    with app_client(redis_url, tmp_path, auth_token=TOKEN, auth_reads=True) as api:
        for path in ("/metrics", "/metrics/targets", "/jobmanager/metrics", "/taskmanagers/metrics"):
            assert api.get(path).status_code == 401, path
            assert api.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200, path
    with app_client(redis_url, tmp_path, auth_token=TOKEN) as api:  # a token for mutations only: reads stay open
        assert api.get("/metrics").status_code == 200
