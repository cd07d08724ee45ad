"""The dashboard mounted on a real app (real Redis, real SQLite; no TaskManager process):
installation, pages and empty states, SSE ending, CSRF and the token login."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.backend.ui import install_ui
from millstream.backend.ui.security import SESSION_COOKIE, UIRefused, check_mutation
from tests.backend.test_rest_api import submit, wait_for

HX = {"HX-Request": "true"}


def _client(redis_url: str, tmp_path: Path, token: str | None = None) -> TestClient:
    app = create_app(Settings(redis_url=redis_url, data_dir=tmp_path, heartbeat_interval_ms=200, auth_token=token))
    install_ui(app)
    install_ui(app)  # idempotent: no second mount, no duplicate routes
    return TestClient(app, base_url="http://testserver")


@pytest.fixture
def ui(redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with _client(redis_url, tmp_path) as client:
        yield client


def test_install_twice_mounts_once_and_root_redirects(ui: TestClient) -> None:
    before = len(ui.app.routes)
    install_ui(ui.app)
    assert len(ui.app.routes) == before
    assert [getattr(r, "path", None) for r in ui.app.routes].count("/ui/static") == 1
    r = ui.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui/"
    assert ui.get("/ui/static/vendor/htmx/htmx.min.js").status_code == 200
    assert "/ui/" not in ui.get("/openapi.json").text  # dashboard routes stay out of the REST schema


def test_empty_cluster_pages_say_what_to_do_next(ui: TestClient) -> None:
    assert "Submit a program" in ui.get("/ui/").text
    assert "No TaskManager is registered" in ui.get("/ui/slots").text
    assert "No TaskManager is registered" in ui.get("/ui/taskmanagers").text
    assert "No program uploaded yet" in ui.get("/ui/submit").text
    assert ui.get("/ui/jobmanager").status_code == 200
    assert ui.get("/ui/jobs/" + "f" * 32 + "/graph").status_code == 404


def test_job_page_draws_the_graph_and_its_stream_ends_with_the_job(ui: TestClient) -> None:
    graph = submit(ui, parallelism=2)  # no TaskManager: it waits in CREATED
    jid = graph.job_id
    page = ui.get(f"/ui/jobs/{jid}/graph").text
    assert page.count('class="dag-node"') == len(graph.vertices)
    assert "Cancel job" in page and f'sse-connect="/ui/jobs/{jid}/graph/stream' in page
    tab = ui.get(f"/ui/jobs/{jid}/subtasks", headers=HX).text  # a tab switch returns only the live section
    assert tab.lstrip().startswith('<section id="job-live"') and "<html" not in tab
    ui.app.state.dispatcher.cancel(jid)
    wait_for(lambda: ui.app.state.dispatcher.job_record(jid).state == "CANCELED")
    with ui.stream("GET", f"/ui/jobs/{jid}/graph/stream") as r:
        body = r.read().decode()
    assert "event: header" in body and "CANCELED" in body and body.rstrip().endswith("data: ended")
    assert "event: actions" in body
    ended = ui.get(f"/ui/jobs/{jid}/graph").text
    assert "sse-connect" not in ended and "Cancel job" not in ended  # nothing streams for an ended job


def test_cancel_needs_htmx_and_same_origin_and_announces_itself(ui: TestClient) -> None:
    jid = submit(ui).job_id
    assert ui.post(f"/ui/jobs/{jid}/cancel").status_code == 403
    assert ui.post(f"/ui/jobs/{jid}/cancel", headers={**HX, "Origin": "http://evil.example"}).status_code == 403
    assert ui.post(f"/ui/jobs/{jid}/cancel", headers={**HX, "Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert ui.app.state.dispatcher.job_record(jid).state == "CREATED"
    r = ui.post(f"/ui/jobs/{jid}/cancel", headers={**HX, "Origin": "http://testserver"})
    assert r.status_code == 200 and "Cancellation requested" in r.text
    assert '"job-action"' in r.headers["HX-Trigger"]
    wait_for(lambda: ui.app.state.dispatcher.job_record(jid).state == "CANCELED")


def test_with_a_token_ui_mutations_are_refused_without_a_login(redis_url: str, tmp_path: Path) -> None:
    with _client(redis_url, tmp_path, token="s3cret") as ui:
        jid = submit(ui).job_id
        r = ui.post(f"/ui/jobs/{jid}/cancel", headers={**HX, "Origin": "http://testserver"})
        assert r.status_code == 401
        assert ui.app.state.dispatcher.job_record(jid).state == "CREATED"


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/ui/x", "headers": raw, "query_string": b""})


def test_check_mutation_wants_the_session_cookie_when_a_token_is_set() -> None:
    base = {"HX-Request": "true", "Host": "jm:8081", "Origin": "http://jm:8081"}
    check_mutation(_request(base), None)
    with pytest.raises(UIRefused) as e:
        check_mutation(_request(base), "tok")
    assert e.value.status == 401
    with pytest.raises(UIRefused):  # a cookie no session store knows (sessions: test_ui_sessions.py)
        check_mutation(_request({**base, "Cookie": f"{SESSION_COOKIE}=made-up"}), "tok")


def test_throughput_is_sampled_in_the_background_without_any_viewer(ui: TestClient) -> None:
    jid = submit(ui).job_id  # CREATED is not an end state: it is sampled (at zero records/s)
    history = ui.app.state.ui_throughput
    points = wait_for(lambda: history.series(jid, {})["x"], timeout=8)
    assert len(points) >= 1
