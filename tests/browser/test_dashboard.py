"""The dashboard in headless Chromium against a real cluster (valkey, JobManager, TaskManagers).

Every page must load without console errors; the graph must draw what the JobGraph
and ExecutionGraph hold; figures must change without a reload; Cancel must cancel.
Screenshots land in test-artifacts/.
"""
from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.browser.conftest import shot
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

PROGRAMS = Path(__file__).resolve().parents[1] / "integration" / "programs"
TABS = ("graph", "subtasks", "backpressure", "checkpoints", "savepoints", "exceptions", "watermarks", "timeline", "throughput", "configuration")


def submit(cluster: Cluster, program: str, parallelism: int) -> str:
    r = cluster.run(PROGRAMS / program, options=("-p", str(parallelism), "--detached"))
    assert r.returncode == 0, r.stderr
    jid = re.search(r"[0-9a-f]{32}", r.stdout + r.stderr).group(0)
    cluster.wait_state(jid, ("RUNNING",), 60)
    return jid


@pytest.fixture(scope="module")
def jobs(cluster: Cluster) -> dict[str, str]:
    """An unbounded job on two slots and a backpressured one on one slot."""
    out = {"unbounded": submit(cluster, "unbounded.py", 2), "backpressure": submit(cluster, "backpressure.py", 1)}
    # let every subtask report a few metric samples
    cluster.wait_for(
        lambda: all(
            v["metrics"]["write-records"] > 0 for v in cluster.job(out["backpressure"])["vertices"][:1]
        ),
        30,
        "metrics to arrive",
    )
    time.sleep(2)
    return out


def test_every_page_loads_without_console_errors(cluster: Cluster, jobs: dict[str, str], page) -> None:
    tm = cluster.http.get("/taskmanagers").json()["taskmanagers"][0]["id"]
    for path in ("/ui/", "/ui/jobs", "/ui/slots", "/ui/taskmanagers", f"/ui/taskmanagers/{tm}", "/ui/jobmanager", "/ui/submit", "/ui/login"):
        resp = page.goto(cluster.url + path)
        assert resp.status == 200, path
        page.wait_for_timeout(300)
    for tab in TABS:
        resp = page.goto(f"{cluster.url}/ui/jobs/{jobs['unbounded']}/{tab}")
        assert resp.status == 200, tab
        page.wait_for_timeout(300)
    page.goto(cluster.url + "/")  # the root redirects to the dashboard
    assert page.url.endswith("/ui/")
    page.wait_for_selector("#card-running")
    assert page.inner_text("#card-running").strip() == "2"
    shot(page, "overview")
    page.goto(cluster.url + "/ui/slots")
    assert page.locator(".slot.used").count() == 3 and page.locator(".slot.free").count() == 1
    shot(page, "slots")
    page.goto(f"{cluster.url}/ui/jobs/{jobs['unbounded']}/checkpoints")
    assert "Checkpointing is off for this job (enable it with env.enable_checkpointing(ms))" in page.inner_text(
        "#checkpoints-empty"
    )
    shot(page, "checkpoints-off")


def test_graph_draws_every_vertex_and_every_subtask(cluster: Cluster, jobs: dict[str, str], page) -> None:
    jid = jobs["unbounded"]
    detail = cluster.job(jid)
    page.goto(f"{cluster.url}/ui/jobs/{jid}/graph")
    page.wait_for_selector(".dag[data-laid-out]")
    assert page.locator(".dag-node").count() == len(detail["plan"]["nodes"]) == 2
    assert page.locator("text=HASH").count() == 1  # the edge carries its ship strategy
    # dagre placed the nodes apart, left to right
    boxes = [page.locator(".dag-node").nth(i).bounding_box() for i in range(2)]
    assert abs(boxes[0]["x"] - boxes[1]["x"]) > 100
    # Every line of every node fits inside it (a watermark's date once ran past the node's edge).
    overflowing = page.eval_on_selector_all(
        ".dag-node .node-facts", "els => els.filter(e => e.scrollWidth > e.clientWidth).map(e => e.textContent)"
    )
    assert overflowing == [], overflowing
    shot(page, "job-graph")
    page.click("#view-execution")
    page.wait_for_selector(".dag[data-view=execution][data-laid-out]")
    subtasks = sum(v["parallelism"] for v in detail["vertices"])
    assert page.locator(".subtask-box").count() == subtasks == 4
    assert page.url.endswith("view=execution")
    shot(page, "execution-graph")


def test_records_counter_changes_without_reload(cluster: Cluster, jobs: dict[str, str], page) -> None:
    page.goto(f"{cluster.url}/ui/jobs/{jobs['unbounded']}/subtasks")
    page.evaluate("window.__notReloaded = true")
    first = page.locator(".records-out").first.inner_text()
    page.wait_for_function(
        "t => document.querySelector('.records-out').innerText !== t", arg=first, timeout=15000
    )
    assert page.evaluate("window.__notReloaded") is True
    # At 900 px the subtasks tables fit the window: nothing to scroll sideways.
    page.set_viewport_size({"width": 900, "height": 800})
    page.wait_for_timeout(300)
    assert page.evaluate("document.documentElement.scrollWidth") <= 900
    shot(page, "subtasks-900")


def test_backpressure_tab_names_the_bottleneck(cluster: Cluster, jobs: dict[str, str], page) -> None:
    page.goto(f"{cluster.url}/ui/jobs/{jobs['backpressure']}/backpressure")
    page.wait_for_function("document.querySelector('.bottleneck-name') !== null", timeout=20000)
    assert "slow map" in page.inner_text(".bottleneck-name")
    assert page.locator(".level-high").count() >= 1
    shot(page, "backpressure")
    page.goto(f"{cluster.url}/ui/jobs/{jobs['backpressure']}/graph")
    page.wait_for_selector(".dag[data-laid-out]")
    shot(page, "backpressure-graph")


def test_cancel_from_the_ui_cancels_the_job(cluster: Cluster, jobs: dict[str, str], page) -> None:
    jid = submit(cluster, "unbounded.py", 1)
    page.goto(f"{cluster.url}/ui/jobs/{jid}/graph")
    page.once("dialog", lambda d: d.accept())
    page.click("#cancel-job")
    page.wait_for_selector(".action-result.ok")
    assert "Cancellation requested" in page.inner_text("#action-result")
    cluster.wait_state(jid, ("CANCELED",), 30)
    # the header's stream shows the end by itself, then stops; the button goes away
    page.wait_for_selector("#job-header .state-canceled", timeout=15000)
    page.wait_for_selector("#cancel-job", state="detached", timeout=15000)


def test_refuses_a_cancel_without_htmx_header(cluster: Cluster, jobs: dict[str, str]) -> None:
    r = cluster.http.post(f"/ui/jobs/{jobs['unbounded']}/cancel")
    assert r.status_code == 403
    r = cluster.http.post(
        f"/ui/jobs/{jobs['unbounded']}/cancel", headers={"HX-Request": "true", "Origin": "http://evil.example"}
    )
    assert r.status_code == 403
    assert cluster.job(jobs["unbounded"])["state"] == "RUNNING"


def test_submit_page_shows_the_plan_and_opens_the_job(cluster: Cluster, jobs: dict[str, str], page) -> None:
    page.goto(cluster.url + "/ui/submit")
    page.set_input_files("input[name=jarfile]", str(PROGRAMS / "unbounded.py"))
    page.click("button:has-text('Upload')")
    page.wait_for_selector(".program")
    page.fill(".program input[name=parallelism]", "1")
    page.click(".program button:has-text('Show plan')")
    page.wait_for_selector(".plan .dag[data-laid-out]", timeout=60000)
    assert page.locator(".plan .dag-node").count() == 2
    shot(page, "submit-plan")
    page.once("dialog", lambda d: d.accept())
    page.click(".program button:has-text('Submit')")
    page.wait_for_url(re.compile(r"/ui/jobs/[0-9a-f]{32}/graph"), timeout=60000)
    jid = re.search(r"/ui/jobs/([0-9a-f]{32})/", page.url).group(1)
    page.wait_for_selector(".dag[data-laid-out]")
    cluster.http.patch(f"/jobs/{jid}")
    cluster.wait_state(jid, ("CANCELED",), 30)


def test_throughput_chart_fills_while_open(cluster: Cluster, jobs: dict[str, str], page) -> None:
    page.goto(f"{cluster.url}/ui/jobs/{jobs['unbounded']}/throughput")
    page.wait_for_selector("#throughput-chart canvas")
    first = int(page.get_attribute("#throughput-chart", "data-points"))
    page.wait_for_function(
        "n => +document.getElementById('throughput-chart').dataset.points > n", arg=first, timeout=15000
    )
    assert page.locator(".chart-empty").is_hidden()  # "No data yet" only while there is none
    # Pointing at the chart shows the sample's time in ISO form, and the y axis starts at 0.
    box = page.locator("#throughput-chart .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.9, box["y"] + box["height"] / 2)
    when = page.locator("#throughput-chart .u-legend .u-series").first.locator(".u-value").inner_text()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", when), when
    assert page.evaluate("() => document.getElementById('throughput-chart').uplot.scales.y.min") == 0
    shot(page, "throughput")


def test_exceptions_tab_shows_the_failure_with_an_expandable_trace(cluster: Cluster, jobs: dict[str, str], page) -> None:
    r = cluster.run(PROGRAMS / "failing.py", options=("-p", "1", "--detached"))
    assert r.returncode == 0, r.stderr
    jid = re.search(r"[0-9a-f]{32}", r.stdout + r.stderr).group(0)
    cluster.wait_state(jid, ("FAILED",), 60)
    page.goto(f"{cluster.url}/ui/jobs/{jid}/exceptions")
    row = page.locator(".exceptions-table tbody tr").first
    assert "ValueError" in row.inner_text()
    assert not page.locator(".stacktrace").first.is_visible()
    row.locator("summary").click()
    assert "record 777 is cursed" in page.locator(".stacktrace").first.inner_text()
    assert page.locator("#job-header h1 .state-failed").count() == 1 and page.locator("#cancel-job").count() == 0
    shot(page, "exceptions")
    page.goto(f"{cluster.url}/ui/jobs/{jid}/timeline")
    assert page.locator(".tl-row .tl-seg.state-bg-failed").count() >= 1
    assert page.locator(".tl-label .tl-subtask").first.is_visible()  # each row names its subtask
    shot(page, "timeline")
    # The graph shows the failed vertex in red with its message, nothing to expand.
    page.goto(f"{cluster.url}/ui/jobs/{jid}/graph")
    page.wait_for_selector(".dag[data-laid-out]")
    assert page.locator(".dag-node .node-failure").inner_text() == "ValueError: record 777 is cursed"
    assert page.locator(".dag-node .node-failure").is_visible()
    shot(page, "failed-graph")


def test_jobs_page_filters_by_name_and_state_without_reload(cluster: Cluster, jobs: dict[str, str], page) -> None:
    page.goto(cluster.url + "/ui/jobs")
    page.evaluate("window.__notReloaded = true")
    page.fill("#job-name", "backpress")
    page.wait_for_function("document.querySelectorAll('#job-tables .job-row').length === 1")
    assert page.locator("#job-tables .job-row").first.get_attribute("data-jid") == jobs["backpressure"]
    page.fill("#job-name", "")
    page.wait_for_function("document.querySelectorAll('#job-tables .job-row').length > 1")
    page.select_option("#job-state", "CANCELED")
    page.wait_for_function(
        "(rows => rows.length > 0 && rows.every(e => e.textContent === 'CANCELED'))"
        "([...document.querySelectorAll('#job-tables .job-row td:last-child .state')])"
    )
    assert "state=CANCELED" in page.url and page.evaluate("window.__notReloaded") is True


def test_spark_tab_shows_a_batch_jobs_stages_live(cluster: Cluster, jobs: dict[str, str], page) -> None:
    pytest.importorskip("pyspark")
    known = {j["jid"] for j in cluster.http.get("/jobs/overview").json()["jobs"]}
    with ThreadPoolExecutor(1) as pool:  # execute_and_collect needs an attached client: run it aside
        run = pool.submit(cluster.run, PROGRAMS / "batch_reduce.py", options=("-p", "2"))
        found: list[str] = []

        def submitted() -> bool:
            found[:] = [j["jid"] for j in cluster.http.get("/jobs/overview").json()["jobs"] if j["jid"] not in known]
            return bool(found)

        cluster.wait_for(submitted, 60, "the batch job to be submitted")
        jid = found[0]
        page.goto(f"{cluster.url}/ui/jobs/{jid}/spark")
        page.evaluate("window.__notReloaded = true")
        # stages arrive over the job's stream (Spark takes seconds to start its context)
        page.wait_for_selector(".spark-stage", timeout=120000)
        result = run.result(timeout=180)
    assert result.returncode == 0, result.stderr
    assert cluster.job(jid)["state"] == "FINISHED"
    stages = cluster.job(jid)["spark"]["stages"]
    assert stages and page.locator(".spark-stage").count() >= 1
    # the last update before the stream closes shows every stage done and Spark's UI gone
    page.wait_for_selector("#job-header .state-finished", timeout=15000)
    page.wait_for_function(
        "[...document.querySelectorAll('.spark-stage')].every(r => ['complete', 'skipped'].includes(r.dataset.status))",
        timeout=15000,
    )
    complete = [s for s in stages if s["numCompletedTasks"] == s["numTasks"]]
    assert page.locator(".spark-stage[data-status=complete]").count() == len(complete) >= 1
    assert page.locator(".stage-complete .stage-bar .completed").first.get_attribute("style") == "width: 100.0%"
    assert "closed when the job ended" in page.inner_text("#spark-progress")
    assert page.evaluate("window.__notReloaded") is True
    assert page.locator("nav.tabs a[data-tab=spark]").count() == 1
    shot(page, "spark-stages")
    page.goto(f"{cluster.url}/ui/jobs/{jobs['unbounded']}/graph")  # STREAMING jobs have no Spark tab
    assert page.locator("nav.tabs a[data-tab=spark]").count() == 0


def test_log_tails_open_at_the_newest_line(cluster: Cluster, jobs: dict[str, str], page) -> None:
    log = cluster.workdir / "var" / "log" / "jobmanager.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"2026-11-25 07:00:{i % 60:02d} INFO millstream line {i}\n" for i in range(400)))
    page.goto(f"{cluster.url}/ui/jobmanager")
    # The tail is refreshed live (an htmx swap): read the element on the page at that moment, once
    # it is laid out, not a handle a swap may have detached (it measured 0 x 0 once).
    page.wait_for_function(
        "() => { const el = document.querySelector('pre#jm-log'); return el && el.clientHeight > 0 }"
    )
    height, top, client = page.evaluate(
        "() => { const el = document.querySelector('pre#jm-log'); return [el.scrollHeight, el.scrollTop, el.clientHeight] }"
    )
    assert height > 2 * client  # a tail longer than its box
    assert top + client >= height - 4, (height, top, client)  # showing its end: "line 399"
