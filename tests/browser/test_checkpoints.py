"""The Checkpoints tab in headless Chromium against a real cluster running a job that
checkpoints every 300 ms: checkpoints appear without a reload, a history row opens to each
subtask's figures and stays open while the history updates. Its own cluster: the dashboard
tests' jobs leave too few free slots."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import shot
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

PROGRAMS = Path(__file__).resolve().parents[1] / "integration" / "programs"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A history longer than Flink's default 10: at a checkpoint every 300 ms, 10 rows scroll the row
    this test opens out of the list within 3 s, which a loaded machine takes to get to closing it."""
    c = Cluster(tmp_path_factory.mktemp("cpcluster"))
    c.env["MILLSTREAM_CHECKPOINTS_HISTORY"] = "200"
    try:
        yield c.start(taskmanagers=2, slots=2)
    finally:
        c.stop()


def test_checkpoints_arrive_live_and_a_row_opens_to_its_subtasks(cluster: Cluster, page) -> None:
    # 300,000 records at 15,000/s: about 20 s of checkpoints every 300 ms, so the job is still
    # running when the test looks for live updates and cancels it (60,000 ends after about 4 s)
    r = cluster.run(PROGRAMS / "checkpointed_count.py", "300000", "15000", options=("-p", "2", "--detached"))
    assert r.returncode == 0, r.stderr
    jid = re.search(r"[0-9a-f]{32}", r.stdout + r.stderr).group(0)
    page.goto(f"{cluster.url}/ui/jobs/{jid}/checkpoints")
    page.evaluate("window.__notReloaded = true")
    page.wait_for_function("+document.getElementById('cp-completed').innerText >= 2", timeout=30000)
    assert page.locator(".cp-row.cp-completed").count() >= 2
    assert page.locator(".cp-config").inner_text().count("exactly once") == 1
    page.wait_for_function("+document.getElementById('checkpoint-chart').dataset.points >= 2", timeout=10000)
    assert page.locator("#checkpoint-chart canvas").count() >= 1

    row = page.locator(".cp-row.cp-completed").first
    cid = row.get_attribute("data-cp-id")
    row.locator(".cp-toggle").click()
    detail = page.locator(f"#cp-detail-{cid}")
    page.wait_for_selector(f"#cp-detail-{cid} .cp-subtask")
    # two vertices at parallelism 2: four acknowledged subtasks, each with its sync and async time
    assert detail.locator(".cp-vertex").count() == 2
    assert detail.locator(".cp-subtask").count() == 4 and detail.locator(".cp-pending").count() == 0
    assert "Sync" in detail.inner_text() and "Buffered in alignment" in detail.inner_text()

    # the history re-renders every second; the open row (the newest completed, so still listed) stays open
    first_total = int(page.inner_text("#cp-total"))
    page.wait_for_function("n => +document.getElementById('cp-total').innerText > n", arg=first_total, timeout=10000)
    assert page.locator(f".cp-row[data-cp-id='{cid}']").count() == 1
    assert page.locator(f"#cp-detail-{cid}.open .cp-subtask").count() == 4
    assert page.get_attribute(f".cp-toggle[aria-controls='cp-detail-{cid}']", "aria-expanded") == "true"
    assert page.evaluate("window.__notReloaded") is True
    shot(page, "checkpoints")

    page.locator(f".cp-toggle[aria-controls='cp-detail-{cid}']").click()  # closes again
    assert page.locator(f"#cp-detail-{cid} .cp-subtask").count() == 0
    cluster.http.patch(f"/jobs/{jid}")
    cluster.wait_state(jid, ("CANCELED",), 30)
    page.wait_for_selector("#job-header .state-canceled", timeout=15000)
