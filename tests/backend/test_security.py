"""Control-plane security on a real app (real Redis, real SQLite): the auth matrix, read
protection, CORS, limits, the audit log, and the CLI's refusals to start unsafely."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import pytest
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.engine.datastream import StreamExecutionEnvironment

TOKEN = "the-right-token"
PROGRAM = b"""
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).map(lambda x: x + 1).print()
env.execute("uploaded")
"""
UI = {"HX-Request": "true"}


def app_client(redis_url: str, tmp_path: Path, **overrides) -> TestClient:
    settings = Settings(redis_url=redis_url, data_dir=tmp_path, cluster_secret="test-secret", **overrides)
    return TestClient(create_app(settings))


@pytest.fixture
def open_api(redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with app_client(redis_url, tmp_path) as c:
        yield c


@pytest.fixture
def api(redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with app_client(redis_url, tmp_path, auth_token=TOKEN) as c:
        yield c


def job_files(parallelism: int = 1) -> dict:
    env = StreamExecutionEnvironment().set_parallelism(parallelism)
    env.from_collection([1, 2, 3]).map(lambda x: x * 2).print()
    job_graph, stream_graph = env.get_job_graph("security-job")
    return {
        "jobgraph": (None, json.dumps(job_graph.to_dict())),
        "usercode": ("usercode.bin", cloudpickle.dumps(stream_graph), "application/octet-stream"),
    }


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- the auth matrix -------------------------------------------------------------------
def test_loopback_without_a_token_needs_no_credentials(open_api: TestClient):
    r = open_api.post("/jobs", files=job_files())
    assert r.status_code == 202, r.text
    assert open_api.patch(f"/jobs/{r.json()['jobid']}").status_code == 202
    assert open_api.post("/jars/upload", files={"jarfile": ("p.py", PROGRAM)}).status_code == 200
    assert open_api.get("/jobs/overview").status_code == 200


def test_every_mutation_needs_the_token(api: TestClient):
    jid = "0" * 32
    mutations = [
        ("POST", "/jobs", {"files": job_files()}),
        ("PATCH", f"/jobs/{jid}", {}),
        ("POST", "/jars/upload", {"files": {"jarfile": ("p.py", PROGRAM)}}),
        ("DELETE", f"/jars/{'a' * 32}_p.py", {}),
        ("POST", f"/jars/{'a' * 32}_p.py/run", {"json": {}}),
        ("POST", f"/jars/{'a' * 32}_p.py/plan", {"json": {}}),
        ("POST", "/v1/jobs", {"files": job_files()}),
    ]
    for method, path, kw in mutations:
        for headers in ({}, bearer("wrong"), {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}):
            r = api.request(method, path, headers=headers, **kw)
            assert r.status_code == 401, (method, path, headers, r.status_code)
            assert r.headers["www-authenticate"] == "Bearer"
    assert api.get("/jobs/overview").json() == {"jobs": []}  # nothing got through

    ok = api.post("/jobs", files=job_files(), headers=bearer(TOKEN))
    assert ok.status_code == 202, ok.text
    jid = ok.json()["jobid"]
    assert api.patch(f"/jobs/{jid}", headers=bearer(TOKEN)).status_code == 202
    up = api.post("/jars/upload", files={"jarfile": ("p.py", PROGRAM)}, headers=bearer(TOKEN))
    assert up.status_code == 200
    program = up.json()["filename"]
    run = api.post(f"/jars/{program}/run", json={}, headers=bearer(TOKEN))
    assert run.status_code == 200, run.text
    assert api.delete(f"/jars/{program}", headers=bearer(TOKEN)).status_code == 200
    # Reads stay open unless MILLSTREAM_AUTH_READS is set.
    assert api.get(f"/jobs/{jid}").status_code == 200
    assert api.get("/ui/jobs").status_code == 200


def test_auth_reads_protects_gets_and_the_dashboard(redis_url: str, tmp_path: Path):
    with app_client(redis_url, tmp_path, auth_token=TOKEN, auth_reads=True) as api:
        for path in ("/jobs/overview", "/overview", "/v1/taskmanagers", "/audit", "/openapi.json", "/jars"):
            assert api.get(path).status_code == 401, path
            assert api.get(path, headers=bearer("wrong")).status_code == 401, path
            assert api.get(path, headers=bearer(TOKEN)).status_code == 200, path
        page = api.get("/ui/jobs", follow_redirects=False)
        assert (page.status_code, page.headers["location"]) == (303, "/ui/login")
        assert api.get("/ui/login").status_code == 200  # the way in stays open
        assert api.get("/ui/static/app/app.css").status_code == 200
        login = api.post("/ui/login", data={"token": TOKEN}, headers=UI)
        assert login.status_code == 200
        assert api.get("/ui/jobs", follow_redirects=False).status_code == 200  # the session cookie is the login


def test_binding_beyond_loopback_without_a_token_is_refused_fast(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "MILLSTREAM_AUTH_TOKEN"}
    env.update(MILLSTREAM_DATA_DIR=str(tmp_path), MILLSTREAM_CLUSTER_SECRET="x", REDIS_URL="redis://127.0.0.1:1/0")
    started = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "millstream.backend.cli", "jobmanager", "--host", "0.0.0.0"],
        env=env, capture_output=True, text=True, timeout=30,
    )
    assert r.returncode != 0
    assert "refusing to bind to 0.0.0.0 without MILLSTREAM_AUTH_TOKEN" in r.stderr
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("command", [["jobmanager"], ["taskmanager", "--slots", "1"]])
def test_processes_refuse_to_start_without_the_cluster_secret(tmp_path: Path, command: list[str]):
    env = {k: v for k, v in os.environ.items() if k != "MILLSTREAM_CLUSTER_SECRET"}
    env.update(MILLSTREAM_DATA_DIR=str(tmp_path), REDIS_URL="redis://127.0.0.1:1/0")
    r = subprocess.run([sys.executable, "-m", "millstream.backend.cli", *command], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "without MILLSTREAM_CLUSTER_SECRET" in r.stderr


# -- CORS ------------------------------------------------------------------------------
def test_cors_is_off_unless_configured(open_api: TestClient):
    r = open_api.get("/overview", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers
    pre = open_api.options(
        "/jobs", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in pre.headers


def test_cors_allows_exactly_the_configured_origins(redis_url: str, tmp_path: Path):
    origins = "https://dash.example, https://ops.example"
    with app_client(redis_url, tmp_path, cors_origins=origins) as api:
        for origin in ("https://dash.example", "https://ops.example"):
            r = api.get("/overview", headers={"Origin": origin})
            assert r.headers["access-control-allow-origin"] == origin
            pre = api.options("/jobs", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
            assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == origin
        r = api.get("/overview", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in r.headers
        pre = api.options("/jobs", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
        assert pre.status_code == 400


# -- limits ----------------------------------------------------------------------------
def test_max_parallelism_is_enforced_with_its_name(redis_url: str, tmp_path: Path):
    with app_client(redis_url, tmp_path, max_parallelism=4) as api:
        r = api.post("/jobs", files=job_files(parallelism=5))
        assert r.status_code == 400
        assert "cluster limit 4 (max_parallelism)" in r.json()["errors"][0]
        assert api.post("/jobs", files=job_files(parallelism=4)).status_code == 202


def test_max_concurrent_jobs_answers_429_until_a_job_ends(redis_url: str, tmp_path: Path):
    with app_client(redis_url, tmp_path, max_concurrent_jobs=2) as api:
        first = api.post("/jobs", files=job_files()).json()["jobid"]
        assert api.post("/jobs", files=job_files()).status_code == 202
        r = api.post("/jobs", files=job_files())
        assert r.status_code == 429
        assert "max_concurrent_jobs" in r.json()["errors"][0]
        assert api.patch(f"/jobs/{first}").status_code == 202  # a waiting job cancels at once
        deadline = time.monotonic() + 10
        while api.get(f"/jobs/{first}").json()["state"] != "CANCELED":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert api.post("/jobs", files=job_files()).status_code == 202


def test_request_bodies_over_the_limit_get_413(redis_url: str, tmp_path: Path):
    with app_client(redis_url, tmp_path, max_request_bytes=10_000, max_upload_bytes=5_000) as api:
        big = b"x" * 20_000
        r = api.post("/jars/upload", files={"jarfile": ("p.py", big)})
        assert r.status_code == 413 and "max_request_bytes" in r.json()["errors"][0]

        def chunks():  # no Content-Length: the bytes are counted as they arrive
            for _ in range(20):
                yield b"y" * 1000

        r = api.post("/jobs", content=chunks(), headers={"Content-Type": "multipart/form-data; boundary=b"})
        assert r.status_code == 413 and "max_request_bytes" in r.json()["errors"][0]
        r = api.post("/ui/login", content=chunks(), headers={**UI, "Content-Type": "application/x-www-form-urlencoded"})
        assert r.status_code == 413
        # Under the request limit but over the upload limit: the upload's own 413.
        r = api.post("/jars/upload", files={"jarfile": ("p.py", b"#" * 6_000)})
        assert r.status_code == 413 and "5000" in r.json()["errors"][0]
        assert api.post("/jobs", files=job_files()).status_code != 413  # ordinary requests pass


# -- the audit log ---------------------------------------------------------------------
def test_mutations_are_audited_with_who_what_and_outcome(api: TestClient):
    assert api.post("/jobs", files=job_files()).status_code == 401  # refused: recorded as anonymous
    ok = api.post("/jobs", files=job_files(), headers=bearer(TOKEN))
    jid = ok.json()["jobid"]
    assert api.patch(f"/v1/jobs/{jid}", headers=bearer(TOKEN)).status_code == 202
    program = api.post("/jars/upload", files={"jarfile": ("p.py", PROGRAM)}, headers=bearer(TOKEN)).json()["filename"]
    run_jid = api.post(f"/jars/{program}/run", json={}, headers=bearer(TOKEN)).json()["jobid"]
    assert api.delete(f"/jars/{program}", headers=bearer(TOKEN)).status_code == 200
    assert api.post("/ui/login", data={"token": "nope"}, headers=UI).status_code == 401
    assert api.post("/ui/login", data={"token": TOKEN}, headers=UI).status_code == 200
    assert api.post(f"/ui/jobs/{run_jid}/cancel", headers=UI).status_code == 200
    api.get("/jobs/overview")  # reads are not audited

    entries = api.get("/audit", params={"limit": 50}).json()["entries"]
    got = [(e["actor"], e["action"], e["method"], e["path"], e["job_id"], e["status"]) for e in reversed(entries)]
    assert got == [
        ("anonymous", "submit", "POST", "/jobs", None, 401),
        ("token", "submit", "POST", "/jobs", jid, 202),
        ("token", "cancel", "PATCH", f"/v1/jobs/{jid}", jid, 202),
        ("token", "upload", "POST", "/jars/upload", None, 200),
        ("token", "run", "POST", f"/jars/{program}/run", run_jid, 200),
        ("token", "delete", "DELETE", f"/jars/{program}", None, 200),
        ("anonymous", "login", "POST", "/ui/login", None, 401),
        ("anonymous", "login", "POST", "/ui/login", None, 200),
        ("dashboard-session", "cancel", "POST", f"/ui/jobs/{run_jid}/cancel", run_jid, 200),
    ]
    assert all(e["client"] == "testclient" and e["timestamp"] > 0 for e in entries)
    assert len(api.get("/audit", params={"limit": 2}).json()["entries"]) == 2
    assert api.get("/audit", params={"limit": 0}).status_code == 400

    page = api.get("/ui/audit")
    assert page.status_code == 200
    assert f'href="/ui/jobs/{run_jid}"' in page.text and "dashboard-session" in page.text
    assert 'href="/ui/audit"' in page.text  # in the navigation


def test_dashboard_submission_is_audited_with_the_new_job(open_api: TestClient):
    up = open_api.post("/ui/submit/upload", files={"jarfile": ("p.py", PROGRAM)}, headers=UI)
    assert up.status_code == 200
    [program] = [p["id"] for p in open_api.get("/jars").json()["files"]]
    run = open_api.post(f"/ui/submit/{program}/run", data={"args": "", "parallelism": ""}, headers=UI)
    assert run.status_code == 200, run.text
    jid = run.headers["HX-Redirect"].split("/")[3]
    entries = open_api.get("/audit").json()["entries"]
    assert [(e["actor"], e["action"], e["job_id"]) for e in entries] == [
        ("anonymous", "run", jid),
        ("anonymous", "upload", None),
    ]


@pytest.mark.parametrize("command", [["jobmanager"], ["taskmanager", "--slots", "1"]])
def test_the_benchmark_only_unsealed_switch_is_refused_without_the_benchmark_flag(tmp_path: Path, command: list[str]):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MILLSTREAM_BENCHMARK")}
    env.update(MILLSTREAM_DATA_DIR=str(tmp_path), MILLSTREAM_CLUSTER_SECRET="x", REDIS_URL="redis://127.0.0.1:1/0",
               MILLSTREAM_BENCHMARK_UNSEALED="1")
    r = subprocess.run([sys.executable, "-m", "millstream.backend.cli", *command], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "for benchmarks only; it needs MILLSTREAM_BENCHMARK=1" in " ".join(r.stderr.split())
    # With the flag, still never on a cluster reachable from elsewhere.
    env.update(MILLSTREAM_BENCHMARK="1", MILLSTREAM_AUTH_TOKEN="tok", MILLSTREAM_HOST="0.0.0.0")
    r = subprocess.run([sys.executable, "-m", "millstream.backend.cli", *command], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "unsealed on a cluster bound beyond loopback or with a token" in " ".join(r.stderr.split())
