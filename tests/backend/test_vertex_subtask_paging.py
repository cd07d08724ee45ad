"""The per-subtask backpressure, watermarks and metrics routes, and the metrics aggregated over the subtasks,
page their subtasks (issue 14).

A job of parallelism 2,500 kept in real SQL (as a finished job is) and read through the real app:
each route answers at most ``limit`` subtasks (default and maximum 1000) from ``offset``; a vertex
that fits in one page gets Flink's answer unchanged, and bad values are a 400 naming the parameter.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.jobmanager.job_store import JobRecord

WIDE, NARROW = 2500, 3
WIDE_JOB, NARROW_JOB = "ab" * 16, "cd" * 16


def _metrics(i: int) -> dict[str, Any]:
    # subtask 7 never reported: it has no row in backpressure, no watermark and no metric ids
    return {} if i == 7 else {
        "backPressuredTimeMsPerSecond": 900 if i == 2400 else 10, "idleTimeMsPerSecond": 50,
        "busyTimeMsPerSecond": 40, "currentInputWatermark": 1000 + i, "read-records": i, "ts": 5000,
    }


def _store(api: TestClient, jid: str, parallelism: int) -> str:
    """A finished job with one vertex of ``parallelism`` subtasks, stored in SQL; returns the vertex id."""
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.from_collection([1]).print()
    jg, _ = env.get_job_graph("paged")
    v = jg.vertices[0]
    subtasks = [
        {"subtask": i, "status": "FINISHED", "attempt": 0, "taskmanager_id": None, "slot": 0,
         "timestamps": {"CREATED": 1000, "RUNNING": 1200, "FINISHED": 2000}, "metrics": _metrics(i)}
        for i in range(parallelism)
    ]
    vertices = [{"id": v.id, "name": v.name, "parallelism": parallelism, "maxParallelism": 4096,
                 "status": "FINISHED", "tasks": {"FINISHED": parallelism}, "subtasks": subtasks}]
    graph = {**jg.to_dict(), "job_id": jid}
    api.app.state.dispatcher.store.save_job(
        JobRecord(jid, "paged", "FINISHED", "STREAMING", 1000, 2000, 2000, graph, {"CREATED": 1000, "FINISHED": 2000}, vertices, None)
    )
    return v.id


@pytest.fixture
def api(redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, data_dir=tmp_path, cluster_secret="paging-test-secret")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def test_backpressure_is_paged_and_keeps_the_vertex_level(api: TestClient) -> None:
    vid = _store(api, WIDE_JOB, WIDE)
    url = f"/jobs/{WIDE_JOB}/vertices/{vid}/backpressure"
    first = api.get(url).json()
    assert [s["subtask"] for s in first["subtasks"]] == [i for i in range(1000) if i != 7]  # default page: 1000
    assert (first["subtasks-total"], first["offset"]) == (WIDE, 0)
    assert first["backpressure-level"] == "high"  # subtask 2400's, though it is not on this page
    last = api.get(url, params={"offset": 2000, "limit": 1000}).json()
    assert [s["subtask"] for s in last["subtasks"]] == list(range(2000, WIDE))
    assert last["subtasks"][400]["backpressure-level"] == "high"
    assert api.get(url, params={"offset": WIDE}).json()["subtasks"] == []


def test_watermarks_and_metrics_are_paged_with_the_total_in_a_header(api: TestClient) -> None:
    vid = _store(api, WIDE_JOB, WIDE)
    r = api.get(f"/jobs/{WIDE_JOB}/vertices/{vid}/watermarks")
    assert r.status_code == 200 and r.headers["X-Subtasks-Total"] == str(WIDE)
    assert [w["id"] for w in r.json()] == [f"{i}.currentInputWatermark" for i in range(1000) if i != 7]
    r = api.get(f"/jobs/{WIDE_JOB}/vertices/{vid}/watermarks", params={"offset": 2490, "limit": 5})
    assert r.json() == [{"id": f"{i}.currentInputWatermark", "value": str(1000 + i)} for i in range(2490, 2495)]
    listed = api.get(f"/jobs/{WIDE_JOB}/vertices/{vid}/metrics", params={"offset": 5, "limit": 3})
    assert listed.headers["X-Subtasks-Total"] == str(WIDE)
    assert {m["id"].split(".")[0] for m in listed.json()} == {"5", "6"}  # 7 has none
    got = api.get(f"/jobs/{WIDE_JOB}/vertices/{vid}/metrics", params={"get": "2100.read-records,5.read-records", "offset": 2000})
    assert got.json() == [{"id": "2100.read-records", "value": "2100"}]  # subtask 5 is not on this page
    whole = api.get(f"/jobs/{WIDE_JOB}/vertices/{vid}/metrics").json()
    assert len({m["id"].split(".")[0] for m in whole}) == 999  # 1000 subtasks by default, 7 without metrics


def test_the_aggregated_subtask_metrics_are_paged_and_keep_the_subtasks_selection(api: TestClient) -> None:
    vid = _store(api, WIDE_JOB, WIDE)
    url = f"/jobs/{WIDE_JOB}/vertices/{vid}/subtasks/metrics"
    r = api.get(url, params={"get": "read-records", "agg": "min,max,sum"})
    assert r.status_code == 200 and r.headers["X-Subtasks-Total"] == str(WIDE)
    # the default page: subtasks 0-999 (7 reports nothing), not all 2,500
    assert r.json() == [{"id": "read-records", "min": 0.0, "max": 999.0, "sum": float(sum(range(1000)) - 7)}]
    last = api.get(url, params={"get": "read-records", "agg": "min,max", "offset": 2000, "limit": 1000}).json()
    assert last == [{"id": "read-records", "min": 2000.0, "max": float(WIDE - 1)}]
    # ?subtasks= selects within the page, as in Flink; a selection outside the page has nothing
    picked = api.get(url, params={"get": "read-records", "agg": "sum", "subtasks": "5,2100-2102", "offset": 2000}).json()
    assert picked == [{"id": "read-records", "sum": 6303.0}]
    assert api.get(url, params={"get": "read-records", "subtasks": "5", "offset": 2000}).json() == []
    assert {"id": "read-records"} in api.get(url, params={"offset": 5, "limit": 3}).json()  # the ids listed


def test_a_vertex_that_fits_one_page_gets_flinks_answer_unchanged(api: TestClient) -> None:
    vid = _store(api, NARROW_JOB, NARROW)
    bp = api.get(f"/jobs/{NARROW_JOB}/vertices/{vid}/backpressure").json()
    assert set(bp) == {"status", "backpressure-level", "backpressureLevel", "end-timestamp", "subtasks"}
    assert len(bp["subtasks"]) == NARROW
    for route in ("watermarks", "metrics"):
        r = api.get(f"/jobs/{NARROW_JOB}/vertices/{vid}/{route}")
        assert r.status_code == 200 and "X-Subtasks-Total" not in r.headers
        assert len({m["id"].split(".")[0] for m in r.json()}) == NARROW
    r = api.get(f"/jobs/{NARROW_JOB}/vertices/{vid}/subtasks/metrics", params={"get": "read-records", "agg": "sum"})
    assert r.status_code == 200 and "X-Subtasks-Total" not in r.headers
    assert r.json() == [{"id": "read-records", "sum": 3.0}]


BAD = [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"limit": "ten"}, "limit"),
       ({"offset": -1}, "offset"), ({"offset": str(2**63)}, "offset"), ({"offset": "1.5"}, "offset")]


def test_bad_paging_values_are_a_400_naming_the_parameter(api: TestClient) -> None:
    vid = _store(api, NARROW_JOB, NARROW)
    for route in ("backpressure", "watermarks", "metrics", "subtasks/metrics"):
        for params, named in BAD:
            r = api.get(f"/jobs/{NARROW_JOB}/vertices/{vid}/{route}", params=params)
            assert r.status_code == 400, (route, params, r.text)
            assert any(named in e for e in r.json()["errors"]), r.json()
