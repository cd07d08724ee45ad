"""Bad input found by issue 14 gets a 4xx that says what is wrong, never a 500, and creates nothing.

A real app against a real Redis and SQLite; a TaskManager is registered with free slots, so a graph that
slipped through validation would be scheduled and hold them (as the cycle job did before).
"""
from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
import redis
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.engine.datastream import StreamExecutionEnvironment
from tests.backend.test_rest_api import FAKE_TM_SETTINGS, register_taskmanager, wait_for

PROGRAM = b"""
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).print()
env.execute("tiny")
"""


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    return Settings(redis_url=redis_url, data_dir=tmp_path, **FAKE_TM_SETTINGS)


@pytest.fixture
def api(settings: Settings, redis_url: str) -> Iterator[TestClient]:
    # raise_server_exceptions=False: a bug must show as the 500 a client would see, not as a traceback
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        rds = redis.Redis.from_url(redis_url)
        register_taskmanager(rds, slots=4)
        rds.close()
        # the ResourceManager sees the TaskManager on its next membership pass
        wait_for(lambda: client.get("/overview").json()["slots-available"] == 4)
        yield client


def _graph(parallelism: int = 2) -> tuple[dict[str, Any], bytes]:
    env = StreamExecutionEnvironment().set_parallelism(parallelism)
    env.from_collection([1, 2, 3]).map(lambda x: x * 2).set_parallelism(1).print()
    jg, sg = env.get_job_graph("bad-input")
    return json.loads(json.dumps(jg.to_dict())), cloudpickle.dumps(sg)


def _post_job(api: TestClient, graph: Any, raw: str | None = None):
    _, code = _graph()
    return api.post("/jobs", data={"jobgraph": raw if raw is not None else json.dumps(graph)},
                    files={"usercode": ("usercode", code)})


def _assert_4xx(r, *fragments: str) -> None:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    text = r.text
    for f in fragments:
        assert f in text, text[:500]


def _no_jobs(api: TestClient) -> None:
    assert api.get("/jobs").json() == {"jobs": []}
    assert api.get("/overview").json()["slots-available"] == 4


# -- POST /jobs ------------------------------------------------------------------------------
def test_invalid_graphs_are_refused_before_anything_is_created(api: TestClient):
    good, _ = _graph()
    v0, v1 = good["vertices"][0], good["vertices"][1]
    cycle = json.loads(json.dumps(good))
    cycle["edges"].append({**good["edges"][0], "index": 5, "source_vertex": v1["id"], "target_vertex": v0["id"],
                           "source_node": v1["operators"][-1]["node_id"], "target_node": v0["operators"][0]["node_id"]})
    self_loop = json.loads(json.dumps(good))
    self_loop["edges"][0]["source_vertex"] = v1["id"]
    dup = json.loads(json.dumps(good))
    dup["vertices"][1]["id"] = v0["id"]
    strategy = json.loads(json.dumps(good))
    strategy["edges"][0]["ship_strategy"] = "TELEPORT"
    missing = json.loads(json.dumps(good))
    missing["edges"][0]["target_vertex"] = "e" * 32
    as_string = json.loads(json.dumps(good))
    as_string["vertices"][0]["parallelism"] = "2"
    interval = json.loads(json.dumps(good))
    interval["config"]["execution.checkpointing.interval"] = 1
    cases = [
        (cycle, "leads into source vertex"),
        (self_loop, "self-loop"),
        (dup, "duplicate vertex id"),
        (strategy, "unknown ship strategy"),
        (missing, "does not exist"),
        (as_string, "parallelism must be int"),
        (interval, "at least 10 ms, got 1"),
    ]
    for graph, fragment in cases:
        _assert_4xx(_post_job(api, graph), fragment)
    _no_jobs(api)


def test_a_cycle_between_non_sources_is_refused(api: TestClient):
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.from_collection([1]).map(str).set_parallelism(2).map(str).set_parallelism(1).print()
    jg, sg = env.get_job_graph("cyclic")
    g = json.loads(json.dumps(jg.to_dict()))
    assert len(g["vertices"]) == 3
    _, a, b = g["vertices"]
    g["edges"].append({**g["edges"][0], "index": 9, "source_vertex": b["id"], "target_vertex": a["id"],
                       "source_node": b["operators"][-1]["node_id"], "target_node": a["operators"][0]["node_id"]})
    r = api.post("/jobs", data={"jobgraph": json.dumps(g)}, files={"usercode": ("u", cloudpickle.dumps(sg))})
    _assert_4xx(r, "cycle")
    _no_jobs(api)


def test_deeply_nested_json_is_a_400(api: TestClient):
    r = _post_job(api, None, raw="[" * 100_000 + "]" * 100_000)
    _assert_4xx(r, "nested")
    _no_jobs(api)


def test_parallelism_over_the_cluster_default_limit_is_refused(api: TestClient, settings: Settings):
    assert settings.max_parallelism == 128  # the default max-parallelism bound, not 32768
    g, _ = _graph()
    g["vertices"][0]["parallelism"] = 32768
    g["vertices"][0]["max_parallelism"] = 32768
    _assert_4xx(_post_job(api, g), "exceeds the cluster limit 128")
    _no_jobs(api)


def test_a_valid_graph_is_still_accepted(api: TestClient):
    g, _ = _graph()
    r = _post_job(api, g)
    assert r.status_code == 202, r.text
    assert r.json()["jobid"] == g["job_id"]


# -- uploads and program arguments -------------------------------------------------------------
def _upload(api: TestClient, name: str, data: bytes, path: str = "/jars/upload"):
    return api.post(path, files={"jarfile": (name, data)})


def test_a_zip_that_is_not_a_zip_is_a_400_on_rest_and_dashboard(api: TestClient, settings: Settings):
    _assert_4xx(_upload(api, "p.zip", b"this is not a zip"), "not a valid zip")
    r = api.get("/ui/submit")
    csrf = r.cookies.get("millstream_csrf") or api.cookies.get("millstream_csrf")
    headers = {"HX-Request": "true", **({"X-CSRF-Token": csrf} if csrf else {})}
    r = api.post("/ui/submit/upload", files={"jarfile": ("p.zip", b"PK\x03\x04 truncated")}, headers=headers)
    _assert_4xx(r, "not a valid zip")
    assert api.get("/jars").json()["files"] == []
    assert list((settings.upload_dir).glob("*")) == []


def test_a_zip_upload_still_works(api: TestClient):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("main.py", PROGRAM)
    r = _upload(api, "p.zip", buf.getvalue())
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["a\x00b"], "NUL"),
        (["\ud800"], "surrogate"),
        (["x"] * 100_000, "arguments"),
        (["y" * 200_000], "arguments"),
    ],
    ids=["nul", "lone-surrogate", "many", "long"],
)
def test_bad_program_arguments_are_a_400(api: TestClient, args: list[str], fragment: str):
    jar = _upload(api, "p.py", PROGRAM).json()["filename"]
    for action in ("plan", "run"):
        # json.dumps escapes the lone surrogate as \\ud800, as a JSON client would send it
        r = api.post(f"/jars/{jar}/{action}", content=json.dumps({"programArgsList": args}),
                     headers={"Content-Type": "application/json"})
        _assert_4xx(r, fragment)
    assert api.get("/jobs").json() == {"jobs": []}


def test_results_offset_past_the_bound_is_a_400(api: TestClient):
    r = api.get(f"/jobs/{'0' * 32}/results", params={"offset": str(2**63)})
    _assert_4xx(r, "offset")


@pytest.mark.parametrize("path", ["/tmp/sp\x00x", "/tmp/\ud800"], ids=["nul", "lone-surrogate"])
def test_a_savepoint_path_that_cannot_be_a_path_is_a_400(api: TestClient, path: str):
    jar = _upload(api, "p.py", PROGRAM).json()["filename"]
    r = api.post(f"/jars/{jar}/run", content=json.dumps({"savepointPath": path}),
                 headers={"Content-Type": "application/json"})
    _assert_4xx(r, "savepointPath")
    g, _ = _graph()
    g["config"]["execution.savepoint.path"] = path
    _assert_4xx(_post_job(api, g), "execution.savepoint.path")
    _no_jobs(api)


def test_an_unusable_entry_class_is_a_400(api: TestClient):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("main.py", PROGRAM)
    jar = _upload(api, "p.zip", buf.getvalue()).json()["filename"]
    for entry in ("a\x00b", "x" * 5000, "\ud800"):
        r = api.post(f"/jars/{jar}/plan", content=json.dumps({"entryClass": entry}),
                     headers={"Content-Type": "application/json"})
        _assert_4xx(r, "entry point")


# -- large tables are paged --------------------------------------------------------------------
def test_subtask_lists_of_a_wide_vertex_are_paged(redis_url: str, tmp_path: Path):
    settings = Settings(redis_url=redis_url, data_dir=tmp_path, max_parallelism=1500, **FAKE_TM_SETTINGS)
    with TestClient(create_app(settings), raise_server_exceptions=False) as api:
        rds = redis.Redis.from_url(redis_url)
        register_taskmanager(rds, slots=1200)
        rds.close()
        env = StreamExecutionEnvironment().set_parallelism(1200)
        env.from_collection([1, 2, 3]).print()
        jg, sg = env.get_job_graph("wide")
        r = api.post("/jobs", data={"jobgraph": json.dumps(jg.to_dict())}, files={"usercode": ("u", cloudpickle.dumps(sg))})
        assert r.status_code == 202, r.text
        jid, vid = jg.job_id, jg.vertices[-1].id
        deadline = time.monotonic() + 30
        while not api.get(f"/jobs/{jid}/vertices/{vid}").json()["subtasks"]:
            assert time.monotonic() < deadline, "the job was never scheduled"
        first = api.get(f"/jobs/{jid}/vertices/{vid}").json()
        assert len(first["subtasks"]) == 1000 and first["subtasks-total"] == 1200 and first["offset"] == 0
        rest = api.get(f"/jobs/{jid}/vertices/{vid}", params={"offset": 1000}).json()
        assert [st["subtask"] for st in rest["subtasks"]] == list(range(1000, 1200))
        times = api.get(f"/jobs/{jid}/vertices/{vid}/subtasktimes", params={"offset": 1150, "limit": 10}).json()
        assert [st["subtask"] for st in times["subtasks"]] == list(range(1150, 1160))
        assert times["subtasks-total"] == 1200
        _assert_4xx(api.get(f"/jobs/{jid}/vertices/{vid}", params={"limit": 5000}), "limit")
        _assert_4xx(api.get(f"/jobs/{jid}/vertices/{vid}", params={"offset": str(2**63)}), "offset")
        page = api.get(f"/ui/jobs/{jid}/subtasks")
        assert page.status_code == 200
        assert page.text.count("<tr>") <= 220, "the dashboard's subtasks tab is not paged"
        assert "1200 subtasks" in page.text and "page=2" in page.text
        page2 = api.get(f"/ui/jobs/{jid}/subtasks", params={"page": 6})
        assert "<td>1000</td>" in page2.text and "<td>1199</td>" in page2.text and "<td>999</td>" not in page2.text
        assert "<td>999</td>" in api.get(f"/ui/jobs/{jid}/subtasks", params={"page": 5}).text
        assert api.get(f"/ui/jobs/{jid}/subtasks", params={"page": 0}).status_code == 400  # as REST: says why


def test_small_vertices_keep_flinks_exact_shape(api: TestClient):
    g, code = _graph()
    assert _post_job(api, g).status_code == 202
    vid = g["vertices"][-1]["id"]
    deadline = time.monotonic() + 30
    while not (d := api.get(f"/jobs/{g['job_id']}/vertices/{vid}").json())["subtasks"]:
        assert time.monotonic() < deadline
    assert "subtasks-total" not in d and len(d["subtasks"]) == 2


@pytest.mark.parametrize("path", ["/tmp/sp\x00x", "/tmp/\ud800"], ids=["nul", "lone-surrogate"])
def test_a_savepoint_target_that_cannot_be_a_path_is_refused_not_a_crash(tmp_path: Path, path: str):
    """What POST /jobs/{id}/savepoints and /stop ask before writing: such a target-directory was a
    ValueError (500) in os.path.realpath; now it is outside every state root, a 4xx."""
    from millstream.engine.jobmanager.savepoints import OperationRejected, StateRoots

    with pytest.raises(OperationRejected) as exc:
        StateRoots.of(tmp_path).confine(path, "target-directory")
    assert 400 <= exc.value.status < 500
