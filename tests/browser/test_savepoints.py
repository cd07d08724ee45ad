"""Savepoints from the dashboard in headless Chromium against a real cluster (valkey, JobManager,
two TaskManagers with two slots each) running an unbounded keyed job at parallelism 2:
a savepoint triggered in the header appears COMPLETED in the Savepoints tab with its path;
Stop with savepoint ends the job FINISHED; "Resume from this savepoint" at parallelism 3 starts
a job whose vertices run at 3, from that savepoint, and opens its page. Its own cluster: it
needs all four slots. Screenshots land in test-artifacts/."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.conftest import shot
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

PROGRAMS = Path(__file__).resolve().parents[1] / "integration" / "programs"


@pytest.fixture(scope="module")
def job(cluster: Cluster) -> str:
    r = cluster.run(PROGRAMS / "unbounded.py", options=("-p", "2", "--detached"))
    assert r.returncode == 0, r.stderr
    jid = re.search(r"[0-9a-f]{32}", r.stdout + r.stderr).group(0)
    cluster.wait_running(jid, 60)
    return jid


def _savepoints(cluster: Cluster, jid: str) -> list[dict]:
    return cluster.http.get(f"/jobs/{jid}/savepoints").json()["savepoints"]


def test_a_savepoint_triggered_in_the_header_appears_completed_with_its_path(cluster: Cluster, job: str, page) -> None:
    page.goto(f"{cluster.url}/ui/jobs/{job}/graph")
    page.wait_for_selector(".dag[data-laid-out]")
    page.evaluate("window.__notReloaded = true")
    page.click("#savepoint-action summary")
    form = page.locator("#savepoint-action form")
    assert form.is_visible()
    default_dir = form.locator("input[name=target_directory]").get_attribute("placeholder")
    assert default_dir and default_dir.endswith("savepoints")  # the cluster's default, shown, not required
    shot(page, "job-header-savepoint-form")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#action-result .action-result.ok")
    message = page.inner_text("#action-result")
    request_id = re.search(r"request ([0-9a-f]{32})", message).group(1)
    assert not form.is_visible()  # the form closed once it had done its work
    shot(page, "job-header")

    page.click("#action-result a:has-text('Savepoints tab')")
    page.wait_for_selector(f".sp-row[data-request-id='{request_id}'][data-status='COMPLETED']", timeout=30000)
    (entry,) = [s for s in _savepoints(cluster, job) if s["request-id"] == request_id]
    assert entry["status"] == "COMPLETED" and entry["location"].startswith(default_dir)
    row = page.locator(f".sp-row[data-request-id='{request_id}']")
    assert row.locator(".sp-path").get_attribute("data-path") == entry["location"]
    assert row.locator(".sp-path b").inner_text() == Path(entry["location"]).name
    assert "savepoint" in row.inner_text() and Path(entry["location"], "_metadata").is_file()
    assert page.url.endswith(f"/ui/jobs/{job}/savepoints") and page.evaluate("window.__notReloaded") is True
    shot(page, "savepoints")

    # the rows re-render every second while the job runs; an open resume form keeps what was typed
    page.evaluate("""window.__spSwaps = 0; document.body.addEventListener('htmx:sseMessage',
        e => { if (e.target.id === 'sp-rows') window.__spSwaps++; })""")
    row.locator("summary:has-text('Resume from this savepoint')").click()
    row.locator("input[name=parallelism]").fill("7")
    page.wait_for_function("window.__spSwaps >= 2", timeout=10000)
    assert row.locator("details.resume").get_attribute("open") is not None
    assert row.locator("input[name=parallelism]").input_value() == "7"
    row.locator("summary:has-text('Resume from this savepoint')").click()  # closes it again

    page.goto(f"{cluster.url}/ui/jobs/{job}/checkpoints")  # the latest savepoint, from the checkpoint statistics
    assert entry["location"] in page.inner_text(".cp-latest")
    shot(page, "checkpoints-with-savepoint")


def test_stop_with_savepoint_from_the_ui_ends_the_job_finished(cluster: Cluster, job: str, page) -> None:
    page.goto(f"{cluster.url}/ui/jobs/{job}/savepoints")
    page.click("#stop-action summary")
    page.check("#stop-action input[name=drain]")  # reaches the engine: the row below says "drained"
    shot(page, "job-header-stop-form")
    page.once("dialog", lambda d: d.accept())
    page.click("#stop-action button[type=submit]")
    page.wait_for_selector("#action-result .action-result.ok")
    request_id = re.search(r"request ([0-9a-f]{32})", page.inner_text("#action-result")).group(1)
    cluster.wait_state(job, ("FINISHED",), 60)
    # the stream shows the end by itself: state, the stop's row, and the header buttons gone
    page.wait_for_selector("#job-header .state-finished", timeout=15000)
    page.wait_for_selector(f".sp-row[data-request-id='{request_id}'][data-status='COMPLETED']", timeout=15000)
    page.wait_for_selector("#stop-action", state="detached", timeout=15000)
    assert "stop with savepoint, drained" in page.inner_text(f".sp-row[data-request-id='{request_id}']")
    assert page.locator(".sp-row[data-status='COMPLETED']").count() == 2


def test_resume_from_a_savepoint_at_a_new_parallelism_opens_the_new_job(cluster: Cluster, job: str, page) -> None:
    stop = next(s for s in _savepoints(cluster, job) if s["stop"])
    page.goto(f"{cluster.url}/ui/jobs/{job}/savepoints")  # the job has ended: its savepoints come from SQL
    row = page.locator(f".sp-row[data-request-id='{stop['request-id']}']")
    row.locator("summary:has-text('Resume from this savepoint')").click()
    form = row.locator(".resume-form")
    assert form.locator("input[name=parallelism]").input_value() == "2"  # starts at the job's parallelism

    # a parallelism above the max parallelism is refused inline and starts nothing
    known = cluster.job_ids()
    form.locator("input[name=parallelism]").fill("1000")
    form.locator("button[type=submit]").click()
    form.locator(".resume-result .action-result.error").wait_for()
    assert "above the max parallelism 128" in form.locator(".resume-result").inner_text()
    assert cluster.job_ids() == known
    # the browser reports the 400 answer on the console; those two lines are expected here
    page.errors[:] = [e for e in page.errors if "400" not in e and "responseError" not in e]
    shot(page, "savepoints-resume-form")

    form.locator("input[name=parallelism]").fill("3")
    form.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r"/ui/jobs/[0-9a-f]{32}/graph"), timeout=60000)
    new = re.search(r"/ui/jobs/([0-9a-f]{32})/", page.url).group(1)
    assert new != job
    page.wait_for_selector(".dag[data-laid-out]")
    detail = cluster.wait_running(new, 60)
    assert [v["parallelism"] for v in detail["vertices"]] == [3, 3]
    restored = cluster.http.get(f"/jobs/{new}/checkpoints").json()["latest"]["restored"]
    assert restored["is_savepoint"] and restored["external_path"] == stop["location"]
    shot(page, "resumed-job")
    cluster.http.patch(f"/jobs/{new}")
    cluster.wait_state(new, ("CANCELED",), 30)
