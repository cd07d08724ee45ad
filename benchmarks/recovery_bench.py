"""Recovery time: SIGKILL a TaskManager under a running checkpointed job and time the way back.

A local cluster of 2 TaskManagers x 2 slots runs ``recovery_job.py`` at
parallelism 2 (so the surviving TaskManager has the slots for the new
attempt and no supervisor restart is needed). Once the job has completed a
checkpoint, one TaskManager's whole process group is SIGKILLed, as when its
machine or container dies. Three instants are measured from the kill:

- ``detected``: the job left RUNNING (missed heartbeats, then RESTARTING);
- ``running``: the job is RUNNING again on the new attempt, every subtask RUNNING;
- ``processing``: the first record processed by the new attempt, stamped by the
  job itself with its attempt number and processing time (the REST records-in
  metrics are sampled only once a second, too coarse for this figure).

Run alone: ``python benchmarks/recovery_bench.py [heartbeat timeout ms ...]``; large state:
``--keys N BACKEND...`` (a kill and a rescale each), or ``--keys N --rate R --linger S BACKEND...`` (a
kill only, S seconds after every key is in a checkpoint, the job still updating R keys a second: a
restore from a long incremental chain; the chain's bytes and files at the kill are printed).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
JOB = Path(__file__).with_name("recovery_job.py")
HEARTBEAT_ENV = "MILLSTREAM_HEARTBEAT_TIMEOUT_MS"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _wait(what: str, check: Any, timeout_s: float, poll_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(poll_s)
    raise TimeoutError(f"timed out waiting for {what}")


def _job_state(http: httpx.Client, jid: str, finished_ok: bool = False) -> tuple[str, bool]:
    """The job's state, and whether every subtask of every vertex is RUNNING (``finished_ok``: or
    FINISHED, as a source subtask left without a split after a rescale is)."""
    job = http.get(f"/jobs/{jid}").json()
    vertices = job.get("vertices") or []
    ok = {"RUNNING", "FINISHED"} if finished_ok else {"RUNNING"}
    all_running = bool(vertices) and all(
        "RUNNING" in (states := {state for state, count in (v.get("tasks") or {}).items() if count}) and states <= ok
        for v in vertices
    )
    return job["state"], all_running


def measure_recovery(
    heartbeat_timeout_ms: int | None,
    n: int = 10_000_000,
    rate: int = 20_000,
    keys: int = 0,
    backend: str = "hashmap",
    linger_s: float = 0.0,
) -> dict[str, Any]:
    """Seconds from the SIGKILL to detection, to RUNNING again and to the first record processed.
    ``keys``: the job counts that many distinct keys (large state, issue 16), and the kill comes once
    a checkpoint completed after every key was seen, and ``linger_s`` later (the chain's length and
    bytes at the kill are in the result as ``chain_files`` and ``chain_bytes``)."""
    from millstream.backend.cluster_launcher import LocalCluster
    from millstream.backend.settings import Settings
    from run import free_port  # benchmarks/run.py

    saved = os.environ.get(HEARTBEAT_ENV)
    if heartbeat_timeout_ms is None:
        os.environ.pop(HEARTBEAT_ENV, None)  # the default, whatever the caller's environment says
    else:
        os.environ[HEARTBEAT_ENV] = str(heartbeat_timeout_ms)
    timeout_ms = heartbeat_timeout_ms or Settings().heartbeat_timeout_ms
    job: subprocess.Popen | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="millstream-recovery-") as tmp:
            settings = Settings(port=free_port(), data_dir=Path(tmp), redis_url=None, database_url=None)
            cluster = LocalCluster(settings, taskmanagers=2, slots=2, restart_taskmanagers=False)
            http = httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=10)
            try:
                cluster.start()
                if not cluster.wait_ready():
                    return {"error": f"the cluster did not start; see {tmp}/log"}
                env = dict(cluster.env, MILLSTREAM_JOBMANAGER=str(http.base_url))
                job = subprocess.Popen(
                    [sys.executable, "-m", "millstream.backend.cli", "run", str(JOB), str(n), str(rate), "2",
                     *([str(keys), backend] if keys else [])],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                )
                stamps: list[tuple[int, int]] = []  # (attempt, processing time ms), as printed by the job
                top = [0]  # the highest key index stamped (large state)

                def read() -> None:
                    for line in job.stdout:  # type: ignore[union-attr]
                        parts = line.split()
                        if len(parts) >= 2 and parts[0].isdigit():
                            stamps.append((int(parts[0]), int(parts[1])))
                            if len(parts) == 3:
                                top[0] = max(top[0], int(parts[2]))

                threading.Thread(target=read, daemon=True).start()
                jid = _wait("the job", lambda: (http.get("/jobs/overview").json()["jobs"] or [{}])[0].get("jid"), 60)
                _wait("a completed checkpoint", lambda: http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 1, 60, 0.2)
                _wait("output of the first attempt", lambda: stamps, 30)
                if keys:  # every key seen, then a checkpoint completed after it that holds them all
                    _wait("every key", lambda: top[0] >= keys - 1000, 900, 0.5)
                    seen = http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]
                    _wait("a checkpoint of every key", lambda: http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= seen + 1, 300, 0.2)
                chain: dict[str, Any] = {}
                if linger_s:
                    time.sleep(linger_s)
                    latest = http.get(f"/jobs/{jid}/checkpoints").json()["latest"]["completed"]
                    shared = next(Path(tmp).rglob("shared"), None)
                    chain = {"chain_bytes": latest["state_size"], "shared_files": len(list(shared.iterdir())) if shared else 0}
                victim = next(c for c in cluster.children if c.name == "taskmanager-0")
                killed_at = _now_ms()
                os.killpg(victim.proc.pid, signal.SIGKILL)  # the TaskManager and its slot processes
                detected_at = _wait("the failure to be noticed", lambda: _job_state(http, jid)[0] != "RUNNING" and _now_ms(), timeout_ms / 1000 + 60)
                running_at = _wait("RUNNING again", lambda: _job_state(http, jid) == ("RUNNING", True) and _now_ms(), 300)
                first = _wait("a record of the new attempt", lambda: next((t for a, t in stamps if a > 0), None), 300)
                return {
                    "heartbeat_timeout_ms": timeout_ms,
                    "detected_s": (detected_at - killed_at) / 1000,
                    "running_s": (running_at - killed_at) / 1000,
                    "processing_s": (first - killed_at) / 1000,
                    **chain,
                }
            finally:
                if job is not None:
                    job.kill()
                    job.wait()
                cluster.shutdown()
    except TimeoutError as e:
        return {"heartbeat_timeout_ms": timeout_ms, "error": str(e)}
    finally:
        if saved is None:
            os.environ.pop(HEARTBEAT_ENV, None)
        else:
            os.environ[HEARTBEAT_ENV] = saved


def measure_rescale(keys: int, backend: str, rate: int = 60_000) -> dict[str, Any]:
    """A job of ``keys`` keys at parallelism 2 is stopped with a savepoint once every key is in a
    checkpoint, then resumed from it at parallelism 3: seconds from the resubmission to RUNNING and
    to the first record processed (and the savepoint's duration)."""
    from millstream.backend.cluster_launcher import LocalCluster
    from millstream.backend.settings import Settings
    from run import free_port  # benchmarks/run.py

    procs: list[subprocess.Popen] = []
    try:
        with tempfile.TemporaryDirectory(prefix="millstream-rescale-") as tmp:
            settings = Settings(port=free_port(), data_dir=Path(tmp), redis_url=None, database_url=None)
            cluster = LocalCluster(settings, taskmanagers=2, slots=2, restart_taskmanagers=False)
            http = httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=30)
            try:
                cluster.start()
                if not cluster.wait_ready():
                    return {"error": f"the cluster did not start; see {tmp}/log"}
                env = dict(cluster.env, MILLSTREAM_JOBMANAGER=str(http.base_url))
                stamps: list[tuple[int, int]] = []
                top = [0]

                def start(p: int, savepoint: str | None) -> subprocess.Popen:
                    args = [sys.executable, "-m", "millstream.backend.cli", "run", "-p", str(p), *(["-s", savepoint] if savepoint else []),
                            str(JOB), str(8 * keys), str(rate), str(p), str(keys), backend]
                    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                    procs.append(proc)

                    def read() -> None:
                        for line in proc.stdout:  # type: ignore[union-attr]
                            parts = line.split()
                            if len(parts) == 3 and parts[0].isdigit():
                                stamps.append((p, int(parts[1])))
                                top[0] = max(top[0], int(parts[2]))

                    threading.Thread(target=read, daemon=True).start()
                    return proc

                start(2, None)
                jid = _wait("the job", lambda: (http.get("/jobs/overview").json()["jobs"] or [{}])[0].get("jid"), 60)
                _wait("every key", lambda: top[0] >= keys - 1000, 900, 0.5)
                seen = http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]
                _wait("a checkpoint of every key", lambda: http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= seen + 1, 300, 0.2)
                t0 = _now_ms()
                trigger = http.post(f"/jobs/{jid}/stop", json={"targetDirectory": str(Path(tmp) / "savepoints"), "drain": False}).json()["request-id"]

                def done() -> str | None:
                    st = http.get(f"/jobs/{jid}/savepoints/{trigger}").json()
                    if st["status"]["id"] != "COMPLETED":
                        return None
                    op = st.get("operation") or {}
                    if "location" not in op:
                        raise TimeoutError(f"the savepoint failed: {str(op)[:300]}")
                    return op["location"]

                location = _wait("the stop-with-savepoint", done, 600, 0.2)
                saved_at = _now_ms()
                _wait("the old job to end", lambda: _job_state(http, jid)[0] in ("FINISHED", "CANCELED", "FAILED") and True, 120)
                submitted_at = _now_ms()
                start(3, location)
                jid3 = _wait("the rescaled job", lambda: next((j["jid"] for j in http.get("/jobs/overview").json()["jobs"] if j["jid"] != jid), None), 60)
                running_at = _wait("RUNNING at parallelism 3", lambda: _job_state(http, jid3, True) == ("RUNNING", True) and _now_ms(), 600)
                first = _wait("a record of the rescaled job", lambda: next((t for p, t in stamps if p == 3), None), 600)
                return {
                    "savepoint_s": (saved_at - t0) / 1000,
                    "running_s": (running_at - submitted_at) / 1000,
                    "processing_s": (first - submitted_at) / 1000,
                }
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
                cluster.shutdown()
    except TimeoutError as e:
        return {"error": str(e)}


def describe(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"failed: {r['error']}"
    if "savepoint_s" in r:
        return (
            f"stop-with-savepoint {r['savepoint_s']:.2f} s; resubmitted at parallelism 3: RUNNING after "
            f"{r['running_s']:.2f} s, processing records after {r['processing_s']:.2f} s"
        )
    chain = (
        f" (at the kill: the last checkpoint referred to {r['chain_bytes']:,} bytes; {r['shared_files']} files in the shared directory)"
        if "chain_bytes" in r
        else ""
    )
    return (
        f"kill -> detected {r['detected_s']:.2f} s, RUNNING again {r['running_s']:.2f} s, "
        f"processing records {r['processing_s']:.2f} s" + chain
    )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if sys.argv[1:2] == ["--keys"] and "--linger" in sys.argv:
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("--keys", type=int, required=True)
        ap.add_argument("--rate", type=int, default=5_000, help="records a second (5,000 over 1 M keys: 1 % per 2 s interval)")
        ap.add_argument("--linger", type=float, required=True, help="seconds between every key checkpointed and the kill")
        ap.add_argument("backends", nargs="+")
        a = ap.parse_args()
        for b in a.backends:
            r = measure_recovery(3000, n=100 * a.keys, rate=a.rate, keys=a.keys, backend=b, linger_s=a.linger)
            print(f"{a.keys:,} keys, {b}, {a.rate:,} records/s, kill {a.linger:.0f} s after every key was checkpointed: {describe(r)}", flush=True)
        sys.exit(0)
    if sys.argv[1:2] == ["--keys"]:  # --keys N BACKEND...: a large-state job, 3000 ms heartbeat timeout
        k = int(sys.argv[2])
        for b in sys.argv[3:]:
            r = measure_recovery(3000, n=4 * k, rate=60_000, keys=k, backend=b)
            print(f"{k:,} keys, {b}, TaskManager SIGKILL (3 s heartbeat timeout): {describe(r)}", flush=True)
            print(f"{k:,} keys, {b}, rescale 2 -> 3: {describe(measure_rescale(k, b))}", flush=True)
        sys.exit(0)
    for arg in sys.argv[1:] or ["default", "3000"]:
        ms = None if arg == "default" else int(arg)
        print(f"heartbeat timeout {arg}: {describe(measure_recovery(ms))}", flush=True)
