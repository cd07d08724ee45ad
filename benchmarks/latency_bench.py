"""End-to-end latency from latency markers (issue 17), and what the markers cost.

On a local cluster (2 TaskManagers x 2 slots, P=2, 10 ms buffer timeout, a keyed shuffle):

* latency: the job runs paced at each rate for ``seconds``; then its latency histograms are read from
  ``GET /jobs/{id}/metrics`` (Flink's ``latency.source_id...operator_id...latency_p50/_p99``), for the
  sink's operator (the last one) only: from each source subtask to each sink subtask. Reported: the
  median of their p50s and the highest of their p99s, with the rate the sink actually saw (if the
  machine cannot keep up, the rate says so). Markers every 100 ms, so each histogram's 128-marker
  window covers the last 12.8 s. Each rate runs ``--repeat`` times (one job after another on the
  cluster); each line carries the load average before and after, as the machine is shared.
* cost: throughput of an unpaced run of N records with markers every 100 ms against the same run
  without, as interleaved ABBA pairs on one cluster (benchmarks/interleave.py); median ratio.

Run alone: ``python benchmarks/latency_bench.py``; ``make bench`` runs it too.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402
from run import interleaved, local_cluster, ratio_line  # noqa: E402

JOB = Path(__file__).with_name("latency_job.py")
INTERVAL_MS = 100


def _start(submit: Any, rate: int, parallelism: int) -> str:
    cmd = [sys.executable, "-m", "millstream.backend.cli", "run", "--detached", str(JOB), "paced", str(rate), str(parallelism), str(INTERVAL_MS)]
    out = subprocess.run(cmd, env=submit.env, capture_output=True, text=True, timeout=300)
    m = re.search(r"[0-9a-f]{32}", out.stdout + out.stderr)
    if m is None:
        raise RuntimeError(f"the paced job did not start: {out.stdout}{out.stderr}")
    return m.group(0)


def _sink_records(http: httpx.Client, jid: str) -> float:
    """Records into the last vertex (the map and the sink, chained) so far."""
    last = http.get(f"/jobs/{jid}").json()["vertices"][-1]
    return float(last["metrics"].get("read-records", 0) or 0)


def _sink_rate(http: httpx.Client, jid: str, over_s: float = 3.0) -> float:
    t0, r0 = time.monotonic(), _sink_records(http, jid)
    time.sleep(over_s)
    return (_sink_records(http, jid) - r0) / (time.monotonic() - t0)


def measure_paced(submit: Any, rate: int, seconds: float, parallelism: int = 2) -> dict[str, Any]:
    """``{rate, achieved, p50, p99, histograms}`` of one paced run (ms; achieved in records/s)."""
    http = httpx.Client(base_url=submit.url, timeout=30)
    jid = _start(submit, rate, parallelism)
    try:
        deadline = time.time() + 60
        while http.get(f"/jobs/{jid}").json()["state"] != "RUNNING":
            if time.time() > deadline:
                raise RuntimeError("the paced job did not reach RUNNING")
            time.sleep(0.5)
        time.sleep(seconds)
        achieved = _sink_rate(http, jid)
        plan = http.get(f"/jobs/{jid}/plan").json()["plan"]["nodes"]
        sink_vertex = plan[-1]["id"] if plan else None
        ids = [m["id"] for m in http.get(f"/jobs/{jid}/metrics").json() if m["id"].startswith("latency.")]
        values = {m["id"]: float(m["value"]) for m in http.get(f"/jobs/{jid}/metrics", params={"get": ",".join(ids)}).json()} if ids else {}
    finally:
        http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    # The sink's operator: the operator id measured last in the chain, i.e. the ids that no other
    # histogram's operator follows; simplest, the operator whose p50 is highest is the furthest one.
    by_operator: dict[str, list[tuple[float, float]]] = {}
    for key, value in values.items():
        if key.endswith("_p99"):
            parts = key.split(".")
            by_operator.setdefault(parts[4], []).append((values[key.replace("_p99", "_median")], value))
    if not by_operator:
        return {"rate": rate, "achieved": achieved, "p50": None, "p99": None, "histograms": 0, "vertex": sink_vertex}
    furthest = max(by_operator.values(), key=lambda pairs: statistics.median(p for p, _ in pairs))
    return {
        "rate": rate, "achieved": achieved, "p50": statistics.median(p for p, _ in furthest),
        "p99": max(p for _, p in furthest), "histograms": len(furthest), "vertex": sink_vertex,
    }


def describe(r: dict[str, Any]) -> str:
    load = f", load average {r['load'][0]:.1f} -> {r['load'][1]:.1f}" if "load" in r else ""
    if r["p50"] is None:
        return f"latency at {r['rate']:,} records/s: no latency markers arrived (sink saw {r['achieved']:,.0f}/s){load}"
    return (
        f"latency at {r['rate']:,} records/s (sink saw {r['achieved']:,.0f}/s): p50 {r['p50']:.0f} ms, "
        f"p99 {r['p99']:.0f} ms, source->sink, {r['histograms']} sink-subtask histograms, markers every {INTERVAL_MS} ms{load}"
    )


def measure(rates: list[int], seconds: float, n: int, pairs: int, repeat: int = 1) -> list[str]:
    lines = []
    with local_cluster(2) as submit:
        for rate in rates:
            for _ in range(repeat):
                before = os.getloadavg()[0]
                try:
                    r = measure_paced(submit, rate, seconds)
                    r["load"] = (before, os.getloadavg()[0])
                    lines.append(describe(r))
                except (RuntimeError, httpx.HTTPError) as e:
                    lines.append(f"latency at {rate:,} records/s: failed ({e})")
    if pairs <= 0:
        return lines
    runs = interleaved(
        pairs,
        lambda submit: _throughput(submit, n, 0),
        lambda submit: _throughput(submit, n, INTERVAL_MS),
    )
    lines.append(ratio_line(f"latency markers every {INTERVAL_MS} ms: throughput with / without (keyed shuffle, P=2, N={n:,})", runs))
    lines.append("  runs: " + "; ".join(f"{a} | {b}" for a, b in runs))
    return lines


def _throughput(submit: Any, n: int, interval: int) -> str:
    cmd = [sys.executable, "-m", "millstream.backend.cli", "run", str(JOB), "throughput", str(n), "2", str(interval)]
    out = subprocess.run(cmd, env=submit.env, capture_output=True, text=True, timeout=900)
    line = next((ln for ln in out.stdout.splitlines() if "records_per_s=" in ln), None)
    return line or f"failed: {out.stdout[-300:]}{out.stderr[-300:]}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="100000,300000", help="comma-separated paced rates, records/s")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long each paced run goes before it is read")
    ap.add_argument("-n", type=int, default=5_000_000, help="records of each throughput run")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1, help="paced runs per rate")
    ap.add_argument("--skip-cost", action="store_true", help="leave out the markers' throughput cost")
    args = ap.parse_args()
    print(f"machine: {machine()}", flush=True)
    rates = [int(r) for r in args.rates.split(",")]
    for line in measure(rates, args.seconds, args.n, 0 if args.skip_cost else args.pairs, args.repeat):
        print(line, flush=True)


if __name__ == "__main__":
    main()
