"""The Flame Graph tab and the latency table in headless Chromium against a real cluster: the tab draws
the vertex's graph with the vendored d3-flame-graph and a CPU-burning user function appears by name;
the type switch redraws; the Throughput tab lists latency-marker figures per operator."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.conftest import shot
from tests.integration.cluster import Cluster
from tests.integration.test_flame_graph_latency import burning

pytestmark = pytest.mark.integration

PROGRAMS = Path(__file__).resolve().parents[1] / "integration" / "programs"


@pytest.fixture(scope="module")
def job(cluster: Cluster) -> str:
    r = cluster.run(PROGRAMS / "profiled.py", options=("-p", "2", "--detached"))
    assert r.returncode == 0, r.stderr
    jid = re.search(r"[0-9a-f]{32}", r.stdout + r.stderr).group(0)
    cluster.wait_running(jid)
    burning(cluster, jid)
    return jid


def test_flame_graph_tab_draws_the_burning_function_by_name(cluster: Cluster, job: str, page) -> None:
    page.goto(f"{cluster.url}/ui/jobs/{job}/flamegraph")
    assert page.locator("nav.tabs, .tabs").first.inner_text().count("Flame Graph") == 1
    vertex = next(v for v in cluster.job(job)["vertices"] if "burn" in v["name"])
    page.select_option(".flame-vertex", vertex["id"])
    page.check('input[name="flame-type"][value="on_cpu"]')
    page.wait_for_function(
        "() => /burn_cpu/.test(document.querySelector('#flame-graph svg')?.textContent || '')", timeout=30000
    )
    assert page.locator("#flame-graph svg rect").count() > 3
    assert re.search(r"\d+ samples, taken at \d{4}-\d{2}-\d{2}", page.inner_text(".flame-status"))
    shot(page, "flame-graph-on-cpu")
    page.check('input[name="flame-type"][value="off_cpu"]')
    page.wait_for_function(
        "() => document.querySelector('#flame-graph svg') && /samples/.test(document.querySelector('.flame-status').textContent)",
        timeout=30000,
    )
    page.check('input[name="flame-type"][value="full"]')
    page.wait_for_function(
        "() => /burn_cpu/.test(document.querySelector('#flame-graph svg')?.textContent || '')", timeout=30000
    )


def test_throughput_tab_lists_latency_per_operator(cluster: Cluster, job: str, page) -> None:
    page.goto(f"{cluster.url}/ui/jobs/{job}/throughput")
    page.wait_for_selector(".latency-table tbody tr", timeout=30000)
    text = page.inner_text(".latency-table")
    assert "burn" in text and "numbers" in text and "ms" in text
    shot(page, "latency-table")
