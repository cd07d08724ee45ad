"""The Output tab in headless Chromium: a BATCH job on real Spark prints, and its job page offers the
tab, opens it on the job's lines (what the print sinks and user functions printed on Spark's
executors), and pages it in place. Screenshot: test-artifacts/output-tab.png."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tests.browser.conftest import shot
from tests.integration.cluster import Cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("pyspark") is None, reason="needs pyspark"),
]

PROGRAMS = Path(__file__).resolve().parents[1] / "integration" / "programs"


def test_a_spark_jobs_print_output_shows_on_its_output_tab(cluster: Cluster, page) -> None:
    res = cluster.run(PROGRAMS / "printing.py", "batch", "3000", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    jid = re.findall(r"^Job ([0-9a-f]{32}) ", res.stdout, re.M)[0]
    total = 3000 + 3000 // 50 + 3

    page.goto(f"{cluster.url}/ui/jobs/{jid}/graph")
    page.click('nav.tabs a[data-tab="output"]')
    page.wait_for_selector("#output-lines")
    assert page.url.endswith(f"/ui/jobs/{jid}/output")
    assert page.inner_text("#output-range").startswith(f"Lines {total - 999}–{total} of {total}")
    lines = page.inner_text("#output-lines").splitlines()
    assert len(lines) == 1000
    assert all(re.fullmatch(r"\d*0|map saw \d+|sums> \('k[012]', \d+\)", ln) for ln in lines), lines[:5]
    shot(page, "output-tab")

    page.click("#output-earlier")  # swapped in place, the page stays
    page.wait_for_function(f"document.querySelector('#output-range').innerText.startsWith('Lines {total - 1999}–')")
    assert len(page.inner_text("#output-lines").splitlines()) == 1000
    assert page.url.endswith(f"/ui/jobs/{jid}/output")
    page.click("#output-newest")
    page.wait_for_function(f"document.querySelector('#output-range').innerText.startsWith('Lines {total - 999}–')")
    assert page.locator("#output-later").is_disabled()  # the job ended: nothing comes after the newest
