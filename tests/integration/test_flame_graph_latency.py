"""Flame graphs and latency markers on a real cluster: a job whose map spins in ``burn_cpu`` shows that
function by name in its vertex's on-CPU flame graph, sampled from the slot processes through sealed
control messages; its latency markers reach every operator behind a keyed shuffle and a window and are
reported per source/operator pair in Flink's REST names and Prometheus's."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
LATENCY_FAMILY = "flink_taskmanager_job_latency_source_id_operator_id_operator_subtask_index_latency"


@pytest.fixture(scope="module")
def running_job(cluster: Cluster) -> Any:
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "profiled.py", options=("-p", "2", "--detached"))
    jid = cluster.wait_new_job(known)
    cluster.wait_running(jid)
    burning(cluster, jid)
    yield jid
    cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"))
    run.wait(60)


def burning(cluster: Cluster, jid: str) -> None:
    """Wait until the map has records to burn on: sampled before, its graph would hold only waiting."""
    def busy() -> bool:
        v = next(v for v in cluster.job(jid)["vertices"] if "burn" in v["name"])
        return v["metrics"].get("read-records", 0) > 50

    cluster.wait_for(busy, 30, "records to reach the map")


def _vertex(cluster: Cluster, jid: str, name_part: str) -> str:
    return next(v["id"] for v in cluster.job(jid)["vertices"] if name_part in v["name"])


def _names(node: dict[str, Any]) -> list[str]:
    out = [node["name"]]
    for child in node["children"]:
        out.extend(_names(child))
    return out


def _graph(cluster: Cluster, jid: str, vid: str, kind: str) -> dict[str, Any]:
    answer: dict[str, Any] = {}

    def ready() -> bool:
        nonlocal answer
        r = cluster.http.get(f"/jobs/{jid}/vertices/{vid}/flamegraph", params={"type": kind})
        assert r.status_code == 200, r.text
        answer = r.json()
        assert set(answer) == {"endTimestamp", "data"}
        return answer["endTimestamp"] > 0

    cluster.wait_for(ready, 30, f"the {kind} flame graph")
    return answer


def test_a_cpu_burning_user_function_shows_by_name_in_the_on_cpu_flame_graph(cluster: Cluster, running_job: str) -> None:
    vid = _vertex(cluster, running_job, "burn")
    first = cluster.http.get(f"/jobs/{running_job}/vertices/{vid}/flamegraph", params={"type": "on_cpu"}).json()
    if first["endTimestamp"] < 0:
        assert first == {"endTimestamp": -3, "data": None}  # Flink's "waiting": sampling has started
    on_cpu = _graph(cluster, running_job, vid, "on_cpu")
    assert on_cpu["data"]["name"] == "root" and on_cpu["data"]["value"] > 0
    burning = [n for n in _names(on_cpu["data"]) if ".burn_cpu:" in n]
    assert burning, _names(on_cpu["data"])[:50]
    # Kept and answered from the same samples: the three types split the full graph's samples.
    full = _graph(cluster, running_job, vid, "full")
    off_cpu = _graph(cluster, running_job, vid, "off_cpu")
    assert full["endTimestamp"] == on_cpu["endTimestamp"] == off_cpu["endTimestamp"]
    assert full["data"]["value"] == on_cpu["data"]["value"] + off_cpu["data"]["value"]
    # Two subtasks, 100 samples each at most (a sample misses a thread only between its tasks' records).
    assert 0 < full["data"]["value"] <= 200


def _samples_in(node: dict[str, Any], name_part: str) -> int:
    """Samples whose stack holds a frame named with ``name_part`` (a frame appears once per stack)."""
    if name_part in node["name"]:
        return node["value"]
    return sum(_samples_in(child, name_part) for child in node["children"])


def test_a_short_cpu_burst_gets_roughly_its_share_of_the_samples(cluster: Cluster, running_job: str) -> None:
    """``burn_cpu`` computes 2 ms per record, a record every 10 ms per subtask: its share of the samples
    is roughly the share of time the task is busy (Flink's busyTimeMsPerSecond, measured by the task
    itself around each batch, the burst and the little around it). Sampling at fixed moments or only
    when the task thread gives up the interpreter lock of itself under-counts it, to nothing at worst."""
    vid = _vertex(cluster, running_job, "burn")
    full = _graph(cluster, running_job, vid, "full")["data"]
    share = _samples_in(full, ".burn_cpu:") / full["value"]
    busy: dict[str, list[float]] = {"min": [], "avg": [], "max": []}
    for _ in range(3):  # the task's own figure over the vertex's subtasks, as the samples are merged
        values = cluster.http.get(
            f"/jobs/{running_job}/vertices/{vid}/subtasks/metrics",
            params={"get": "busyTimeMsPerSecond", "agg": "min,avg,max"},
        ).json()[0]
        for agg, kept in busy.items():
            kept.append(values[agg] / 1000)
    low, avg, high = (sum(busy[agg]) / 3 for agg in ("min", "avg", "max"))
    assert avg > 0.05, busy  # the job runs: 2 ms per record at 100 records/s is 20 % of a subtask's time
    if full["value"] > 100:  # both subtasks answered (100 samples each)
        assert 0.5 * avg <= share <= avg + 0.15, (share, busy)
    else:  # a slot that answers after the deadline is left out of the graph: which one is not known
        assert 0.5 * low <= share <= high + 0.15, (share, busy)


def test_task_threads_switch_every_millisecond_in_a_slot(cluster: Cluster, running_job: str) -> None:
    """A slot's subtasks are threads: one due to flush its buffers, or whose read just returned, must
    not wait CPython's 5 ms for a neighbour that computes (engine/taskexecutor/slot_process.py). The
    map reports the interval where it runs as a gauge; 100 µs while a flame graph sampling runs."""
    vid = _vertex(cluster, running_job, "burn")
    ids: list[str] = []

    def listed() -> bool:
        nonlocal ids
        metrics = cluster.http.get(f"/jobs/{running_job}/vertices/{vid}/metrics").json()
        ids = [m["id"] for m in metrics if m["id"].endswith("interpreter.switch_interval_us")]
        return bool(ids)

    cluster.wait_for(listed, 30, "the map's gauge")
    seen: set[float] = set()

    def settled() -> bool:
        # Flink's vertex scope names a subtask's metric "<subtask>.<operator>.<group>.<name>".
        values = cluster.http.get(f"/jobs/{running_job}/vertices/{vid}/metrics", params={"get": ",".join(ids)}).json()
        now = {m["id"].split(".", 1)[0]: float(m["value"]) for m in values}
        seen.update(now.values())
        return set(now) == {"0", "1"} and set(now.values()) == {1000}

    cluster.wait_for(settled, 30, "both subtasks at 1 ms")
    assert seen <= {100, 1000}, seen


def test_flame_graph_refuses_bad_input(cluster: Cluster, running_job: str) -> None:
    vid = _vertex(cluster, running_job, "burn")
    r = cluster.http.get(f"/jobs/{running_job}/vertices/{vid}/flamegraph", params={"type": "hot"})
    assert r.status_code == 400 and "on_cpu" in r.text
    r = cluster.http.get(f"/jobs/{running_job}/vertices/{'0' * 32}/flamegraph")
    assert r.status_code == 404
    assert cluster.http.get("/overview").status_code == 200


def _latency_values(cluster: Cluster, jid: str) -> dict[str, float]:
    ids = [m["id"] for m in cluster.http.get(f"/jobs/{jid}/metrics").json() if m["id"].startswith("latency.")]
    if not ids:
        return {}
    values = cluster.http.get(f"/jobs/{jid}/metrics", params={"get": ",".join(ids)}).json()
    return {m["id"]: float(m["value"]) for m in values}


def test_latency_markers_reach_every_operator_past_keyed_shuffles_and_windows(cluster: Cluster, running_job: str) -> None:
    plan = {n["id"]: n for n in cluster.http.get(f"/jobs/{running_job}/plan").json()["plan"]["nodes"]}
    window = _vertex(cluster, running_job, "Window")
    values: dict[str, float] = {}

    def reported() -> bool:
        nonlocal values
        values = _latency_values(cluster, running_job)
        # Both subtasks of the map and of the window (behind a keyed shuffle and the window itself).
        return sum(k.endswith(".latency_p99") for k in values) >= 4

    cluster.wait_for(reported, 30, "latency histograms in /jobs/{id}/metrics")
    p99 = {k: v for k, v in values.items() if k.endswith(".latency_p99")}
    for name, value in p99.items():
        parts = name.split(".")
        assert parts[0] == "latency" and parts[1] == "source_id" and parts[3] == "operator_id"
        assert parts[5] == "operator_subtask_index" and parts[7] == "latency_p99", name
        assert 0 <= value < 10_000, (name, value)
        median = values[name.replace("_p99", "_median")]
        assert values[name.replace("_p99", "_min")] <= median <= value <= values[name.replace("_p99", "_max")]
    assert window in plan
    # A vertex's id is its head operator's: the window operator itself measured markers on both subtasks.
    operator_subtasks = {(k.split(".")[4], k.split(".")[6]) for k in p99}
    assert {(window, "0"), (window, "1")} <= operator_subtasks, operator_subtasks


def test_latency_histograms_in_prometheus_with_quantiles(cluster: Cluster, running_job: str) -> None:
    targets = cluster.http.get("/metrics/targets").json()
    tms = [t for entry in targets if entry["labels"]["component"] == "taskmanager" for t in entry["targets"]]
    samples: list[Any] = []

    def scraped() -> bool:
        nonlocal samples
        samples = []
        for target in tms:
            text = httpx.get(f"http://{target}/metrics", timeout=10).text
            for family in text_string_to_metric_families(text):
                if family.name == LATENCY_FAMILY:
                    samples.extend(s for s in family.samples if s.labels["job_id"] == running_job)
        return any(s.labels.get("quantile") == "0.99" for s in samples)

    cluster.wait_for(scraped, 30, "latency summaries on the TaskManagers' endpoints")
    quantiles = {s.labels["quantile"] for s in samples if "quantile" in s.labels}
    assert quantiles == {"0.5", "0.75", "0.95", "0.98", "0.99", "0.999"}
    one = next(s for s in samples if s.labels.get("quantile") == "0.99")
    assert {"source_id", "operator_id", "operator_subtask_index", "job_name", "tm_id", "host"} <= set(one.labels)
    assert one.labels["job_name"] == "profiled" and one.value >= 0
    assert any(s.name == LATENCY_FAMILY + "_count" and s.value > 0 for s in samples)
