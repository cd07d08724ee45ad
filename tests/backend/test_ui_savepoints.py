"""The dashboard's savepoint actions and Savepoints tab on a real app (real Redis, real SQLite).

No TaskManager process runs: ``FakeTasks`` answers through Redis as tasks would, so a
savepoint triggered from the dashboard really completes (its ``_metadata`` is written),
and "Resume from this savepoint" really submits a new job from it.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.backend.ui import install_ui, savepoint_view
from millstream.backend.ui.templating import block
from millstream.engine.jobmanager.job_store import SavepointRecord
from tests.backend.test_savepoints_api import FakeTasks, running_job, status
from tests.backend.test_rest_api import FAKE_TM_SETTINGS, wait_for

UI = {"HX-Request": "true", "Origin": "http://testserver"}


@pytest.fixture
def ui(redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(redis_url=redis_url, data_dir=tmp_path / "var", **FAKE_TM_SETTINGS))
    install_ui(app)
    with TestClient(app, base_url="http://testserver") as client:
        yield client


@pytest.fixture
def rds(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def _event(r) -> dict:
    return json.loads(r.headers["HX-Trigger"])["job-action"]


def _sse_event(ui: TestClient, url: str, name: str) -> str:
    """The data of the first event ``name`` on a running job's stream."""
    with ui.stream("GET", url) as s:
        lines = s.iter_lines()
        for line in lines:
            if line.strip() == f"event: {name}":
                break
        data = []
        for line in lines:
            if not line.strip():
                return "\n".join(data)
            data.append(line.removeprefix("data: "))
    raise AssertionError(f"no {name} event")


def _completed_savepoint(ui: TestClient, jid: str, tasks: FakeTasks, target: Path) -> tuple[str, str]:
    r = ui.post(f"/ui/jobs/{jid}/savepoint", data={"target_directory": str(target)}, headers=UI)
    assert r.status_code == 200, r.text
    request_id = _event(r)["requestId"]
    cid, _, location, _, _ = tasks.inbox("trigger_checkpoint")[-1]["barrier"]
    tasks.ack(cid)
    wait_for(lambda: status(ui, jid, request_id)["status"]["id"] == "COMPLETED")
    return request_id, location


def test_header_offers_savepoint_forms_and_no_not_available_text(ui: TestClient, rds: redis.Redis) -> None:
    jid, _ = running_job(ui, rds)
    page = ui.get(f"/ui/jobs/{jid}/graph").text
    assert 'hx-post="/ui/jobs/%s/savepoint"' % jid in page and 'hx-post="/ui/jobs/%s/stop"' % jid in page
    assert "not available yet" not in page and "disabled" not in page.split('id="job-actions"')[1].split("</nav>")[0]
    assert 'name="drain"' in page  # the stop form only
    tab = ui.get(f"/ui/jobs/{jid}/savepoints").text
    assert "No savepoint yet." in tab and 'sse-swap="sp-rows"' in tab
    assert "not available yet" not in ui.get(f"/ui/jobs/{jid}/checkpoints").text


def test_a_savepoint_from_the_dashboard_is_csrf_checked_completes_and_is_listed(
    ui: TestClient, rds: redis.Redis, tmp_path: Path
) -> None:
    jid, tasks = running_job(ui, rds)
    assert ui.post(f"/ui/jobs/{jid}/savepoint").status_code == 403
    assert ui.post(f"/ui/jobs/{jid}/savepoint", headers={**UI, "Origin": "http://evil.example"}).status_code == 403
    assert tasks.inbox("trigger_checkpoint") == []  # refused requests took nothing

    r = ui.post(f"/ui/jobs/{jid}/savepoint", data={"target_directory": str(tmp_path / "sp")}, headers=UI)
    event = _event(r)
    assert event["action"] == "savepoint" and event["ok"] and event["requestId"] in r.text
    assert f'href="/ui/jobs/{jid}/savepoints"' in r.text
    rows = ui.get(f"/ui/jobs/{jid}/savepoints").text
    assert 'data-status="IN_PROGRESS"' in rows and "Resume from this savepoint" not in rows

    cid, _, location, kind, _ = tasks.inbox("trigger_checkpoint")[0]["barrier"]
    assert kind == "SAVEPOINT" and location.startswith(str(tmp_path / "sp"))
    tasks.ack(cid)
    wait_for(lambda: status(ui, jid, event["requestId"])["status"]["id"] == "COMPLETED")
    data = _sse_event(ui, f"/ui/jobs/{jid}/savepoints/stream", "sp-rows")  # the live rows, as the tab gets them
    assert 'data-status="COMPLETED"' in data and location in data and "Resume from this savepoint" in data
    assert 'hx-preserve="true"' in data
    assert "none: take one" not in ui.get(f"/ui/jobs/{jid}/checkpoints").text  # the latest savepoint is listed


def test_bad_target_directory_is_refused_inline(ui: TestClient, rds: redis.Redis, tmp_path: Path) -> None:
    jid, tasks = running_job(ui, rds)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = ui.post(f"/ui/jobs/{jid}/savepoint", data={"target_directory": str(blocker / "sp")}, headers=UI)
    assert r.status_code == 400 and "Refused:" in r.text and not _event(r)["ok"]
    assert tasks.inbox("trigger_checkpoint") == []


def test_stop_with_savepoint_from_the_dashboard_drains_and_finishes(ui: TestClient, rds: redis.Redis, tmp_path: Path) -> None:
    jid, tasks = running_job(ui, rds)
    r = ui.post(f"/ui/jobs/{jid}/stop", data={"target_directory": str(tmp_path / "sp"), "drain": "true"}, headers=UI)
    assert r.status_code == 200 and _event(r)["action"] == "stop" and "ends FINISHED" in r.text
    cid, _, _, kind, drain = tasks.inbox("trigger_checkpoint")[0]["barrier"]
    assert (kind, drain) == ("SYNC_SAVEPOINT", True)
    tasks.ack(cid)
    wait_for(lambda: tasks.inbox("notify_checkpoint_complete"))
    tasks.report("FINISHED")
    wait_for(lambda: ui.get(f"/jobs/{jid}").json()["state"] == "FINISHED")
    tab = ui.get(f"/ui/jobs/{jid}/savepoints").text  # an ended job's savepoints come from SQL
    assert "stop with savepoint, drained" in tab and "can take no new savepoint" in tab
    assert "sse-connect" not in tab and 'hx-post="/ui/jobs/%s/stop"' % jid not in tab


def test_resume_starts_a_rescaled_job_from_the_savepoint_and_refuses_bad_input(
    ui: TestClient, rds: redis.Redis, tmp_path: Path
) -> None:
    jid, tasks = running_job(ui, rds)  # parallelism 2; the collection source is non-parallel
    request_id, location = _completed_savepoint(ui, jid, tasks, tmp_path / "sp")
    dispatcher = ui.app.state.dispatcher
    before = len(dispatcher.job_records())
    url = f"/ui/jobs/{jid}/savepoints/{request_id}/resume"

    too_big = ui.post(url, data={"parallelism": "129"}, headers=UI)
    assert too_big.status_code == 400 and "above the max parallelism 128" in too_big.text
    assert "Nothing was started" in too_big.text and "HX-Redirect" not in too_big.headers
    assert ui.post(url, data={"parallelism": "two"}, headers=UI).status_code == 400
    assert ui.post(f"/ui/jobs/{jid}/savepoints/nope/resume", data={"parallelism": "3"}, headers=UI).status_code == 400
    assert ui.post(url, data={"parallelism": "3"}).status_code == 403  # CSRF-checked like the others
    assert len(dispatcher.job_records()) == before  # nothing started

    r = ui.post(url, data={"parallelism": "3"}, headers=UI)
    assert r.status_code == 200, r.text
    new = _event(r)["jobId"]
    assert r.headers["HX-Redirect"] == f"/ui/jobs/{new}/graph" and new != jid
    detail = ui.get(f"/jobs/{new}").json()
    assert {v["name"]: v["parallelism"] for v in detail["vertices"]} == {
        "Source: Collection Source": 1, "Map -> Sink: Print to Std. Out": 3,
    }
    config = dispatcher.job_record(new).job_graph["config"]
    assert config["execution.savepoint.path"] == location and config["parallelism.default"] == 3
    assert "Left at their own parallelism: Source: Collection Source" in r.text


def test_submit_page_passes_the_savepoint_path_to_the_dispatcher(ui: TestClient, tmp_path: Path) -> None:
    program = b"from pyflink.datastream import StreamExecutionEnvironment\n" \
        b"env = StreamExecutionEnvironment.get_execution_environment()\n" \
        b"env.from_collection([1, 2]).map(lambda x: x).uid('m').print()\nenv.execute('up')\n"
    assert ui.post("/ui/submit/upload", files={"jarfile": ("p.py", program)}, headers=UI).status_code == 200
    page = ui.get("/ui/submit").text
    assert 'name="savepoint_path"' in page and 'name="allow_non_restored_state"' in page
    [jar] = [p["id"] for p in ui.get("/jars").json()["files"]]
    before = len(ui.app.state.dispatcher.job_records())
    r = ui.post(f"/ui/submit/{jar}/run", data={"savepoint_path": str(tmp_path / "nowhere")}, headers=UI)
    assert r.status_code == 400 and "invalid savepoint" in r.text
    assert len(ui.app.state.dispatcher.job_records()) == before


def test_with_a_token_savepoint_actions_need_the_login(redis_url: str, rds: redis.Redis, tmp_path: Path) -> None:
    settings = Settings(redis_url=redis_url, data_dir=tmp_path / "var", auth_token="s3cret", **FAKE_TM_SETTINGS)
    app = create_app(settings)
    install_ui(app)
    with TestClient(app, base_url="http://testserver") as ui:
        ui.headers["Authorization"] = "Bearer s3cret"  # for the REST reads and submissions of running_job
        jid, tasks = running_job(ui, rds)
        del ui.headers["Authorization"]  # the dashboard's forms send the session cookie, never the token
        for action in ("savepoint", "stop"):
            r = ui.post(f"/ui/jobs/{jid}/{action}", data={"target_directory": str(tmp_path / "sp")}, headers=UI)
            assert r.status_code == 401 and "/ui/login" in r.text
        r = ui.post(f"/ui/jobs/{jid}/savepoints/any/resume", data={"parallelism": "1"}, headers=UI)
        assert r.status_code == 401
        assert tasks.inbox("trigger_checkpoint") == []
        assert ui.post("/ui/login", data={"token": "s3cret"}, headers=UI).status_code == 200
        r = ui.post(f"/ui/jobs/{jid}/savepoint", data={"target_directory": str(tmp_path / "sp")}, headers=UI)
        assert r.status_code == 200 and _event(r)["ok"]
        assert len(tasks.inbox("trigger_checkpoint")) == 1


def test_rows_say_kind_times_and_failure_and_offer_resume_only_for_completed() -> None:
    t = 1_700_000_000_000
    records = [
        SavepointRecord("a" * 32, "r3", "IN_PROGRESS", t + 9000, "/sp", checkpoint_id=3),
        SavepointRecord("a" * 32, "r2", "FAILED", t + 5000, "/sp", 2, "SYNC_SAVEPOINT", drain=True,
                        completion_timestamp=t + 6500, failure_cause="Checkpoint expired before completing."),
        SavepointRecord("a" * 32, "r.1", "COMPLETED", t, "/sp", 1, path="/sp/savepoint-aaaaaa-0123",
                        completion_timestamp=t + 250),
    ]
    graph = {"config": {"parallelism.default": 2, "state.savepoints.dir": "file:///job/sp"},
             "vertices": [{"parallelism": 2, "max_parallelism": 64}, {"parallelism": 1, "max_parallelism": 128}]}
    tab = savepoint_view.savepoints_tab(records, graph, alive=True, on_spark=False, cluster_dir="/cluster/sp")
    assert tab.in_progress and tab.can_trigger and tab.default_dir == "/job/sp" and tab.max_parallelism == 64
    assert [r.kind for r in tab.rows] == ["savepoint", "stop with savepoint, drained", "savepoint"]
    html = block("job/savepoints.html", "rows", header=SimpleNamespace(jid="a" * 32, alive=True), savepoints=tab)
    assert html.count('class="sp-row') == 3 and html.count("Resume from this savepoint") == 1
    assert "/ui/jobs/%s/savepoints/r.1/resume" % ("a" * 32) in html
    assert "Checkpoint expired before completing." in html and "1.5s" in html and "250 ms" in html
    assert "writing into <span class=\"mono\">/sp</span>" in html
    ended = savepoint_view.savepoints_tab([], graph, alive=False, on_spark=False, cluster_dir=None)
    assert not ended.can_trigger and "has ended" in (ended.why_not or "")
    assert savepoint_view.savepoints_tab([], {"config": {}}, alive=True, on_spark=True, cluster_dir=None).why_not == \
        "This job runs on Spark, which takes no savepoints."
