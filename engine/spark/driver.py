"""The Spark driver process of one Millstream job.

``python -m millstream.engine.spark.driver --job-id J --secrets-stdin --spark-master M
--job-graph jobgraph.json [--user-code usercode.bin] [--error-file F] [--conf k=v ...]``

With ``--secrets-stdin`` (how the JobManager starts it) the Redis URL, whose password ``ps`` would
otherwise show, and the cluster secret come as one JSON line on stdin; ``--redis-url`` and
``--cluster-secret-file`` remain for running a driver by hand.

The JobGraph comes as JSON in a file; the user code (a cloudpickled
StreamGraph) from ``--user-code`` or else from Redis
(``millstream.engine.redis_keys.job_user_code``, signed: verified with the cluster secret
before unpickling). All Spark jobs run in the job group
named by the job id. Collected results go to the job's Redis collect list as
entries of the collect protocol (engine/runtime/collect.py), as the native runtime writes them; progress goes to
``millstream.engine.redis_keys.spark_progress``. SIGTERM, SIGINT or the Redis cancel key
cancel the job group.

Exit status: 0 finished, 1 failed, 2 untranslatable, 3 canceled; on failure
the report (ending with the user's exception line) goes to stderr and to
``--error-file``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable

import cloudpickle
import redis

from millstream.engine import redis_keys
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.runtime import collect
from millstream.engine.runtime.io.redis_collect import RedisCollectGateway
from millstream.engine.runtime.io.job_stdout import stdout_key
from millstream.engine.spark.print_stream import set_print_stream
from millstream.engine.spark.spark_cancel import spark_cancel_requested
from millstream.engine.spark.validation import UntranslatableJob
from millstream.engine.security.process_hardening import make_undumpable
from millstream.engine.taskexecutor import code_signing
from millstream.engine.runtime.python_dependencies import activate, materialize, zip_entry
from millstream.engine.spark.engine_archive import build as build_engine_archive
from millstream.engine.spark.engine_archive import is_local_master

EXIT_FINISHED, EXIT_FAILED, EXIT_UNTRANSLATABLE, EXIT_CANCELED = 0, 1, 2, 3
PROGRESS_INTERVAL_S = 0.5


def progress_snapshot(sc: Any, job_group: str) -> dict[str, Any]:
    """Spark's view of the job group: its Spark jobs and their stages' task counts."""
    tracker = sc.statusTracker()
    jobs, stages = [], []
    for job_id in sorted(tracker.getJobIdsForGroup(job_group)):
        info = tracker.getJobInfo(job_id)
        if info is None:
            continue
        jobs.append({"jobId": job_id, "status": str(info.status), "stageIds": list(info.stageIds)})
        for stage_id in info.stageIds:
            s = tracker.getStageInfo(stage_id)
            if s is None:  # not submitted yet (or skipped)
                continue
            stages.append(
                {
                    "stageId": s.stageId,
                    "jobId": job_id,
                    "name": s.name,
                    "numTasks": s.numTasks,
                    "numActiveTasks": s.numActiveTasks,
                    "numCompletedTasks": s.numCompletedTasks,
                    "numFailedTasks": s.numFailedTasks,
                }
            )
    return {
        "applicationId": sc.applicationId,
        "uiWebUrl": sc.uiWebUrl,
        "master": sc.master,
        "jobs": jobs,
        "stages": stages,
        "updated": int(time.time() * 1000),
    }


class _Watcher(threading.Thread):
    """Publishes progress and turns a cancel request (signal or Redis key) into cancelJobGroup."""

    def __init__(self, sc: Any, client: redis.Redis, job_id: str) -> None:
        super().__init__(name="spark-driver-watcher", daemon=True)
        self.sc = sc
        self.client = client
        self.job_id = job_id
        self.cancel_requested = threading.Event()
        self.stopped = threading.Event()
        self.secret: bytes | None = None  # the cluster secret: a cancel key not sealed with it is ignored

    def publish(self) -> None:
        try:
            snap = progress_snapshot(self.sc, self.job_id)
            self.client.set(redis_keys.spark_progress(self.job_id), json.dumps(snap), ex=redis_keys.SPARK_PROGRESS_TTL_S)
        except Exception:  # progress is best effort; the job itself must not fail for it
            pass

    def run(self) -> None:
        cancelled = False
        while not self.stopped.wait(PROGRESS_INTERVAL_S):
            if not self.cancel_requested.is_set() and spark_cancel_requested(
                self.client.get(redis_keys.spark_cancel(self.job_id)), self.secret, self.job_id
            ):
                self.cancel_requested.set()
            if self.cancel_requested.is_set() and not cancelled:
                # Called from this thread, never from the signal handler: the main
                # thread may be inside a Py4J call when the signal arrives.
                self.sc.cancelJobGroup(self.job_id)
                cancelled = True
            self.publish()


def python_cause(text: str) -> str | None:
    """The Python worker's traceback inside a Spark error, if the failure came from user code."""
    i = text.rfind("Traceback (most recent call last)")
    if i < 0:
        return None
    lines = []
    for line in text[i:].splitlines():
        if line.startswith("\tat ") or line.startswith(" SQLSTATE"):
            break
        lines.append(line)
    return "\n".join(lines).strip() or None


def _load_user_code(ns: argparse.Namespace, client: redis.Redis) -> bytes:
    if ns.user_code:
        with open(ns.user_code, "rb") as f:
            return f.read()
    envelope = client.get(redis_keys.job_user_code(ns.job_id))
    if envelope is None:
        raise RuntimeError(f"no user code for job {ns.job_id} in Redis")
    # Redis is shared: code from there is unpickled only with a valid signature.
    return code_signing.verify(_secret(ns), ns.job_id, envelope)


def _secret(ns: argparse.Namespace) -> bytes | None:
    """The cluster secret: verifies user code and seals the collect entries this driver writes."""
    if getattr(ns, "cluster_secret", None):
        return ns.cluster_secret.encode()
    if not ns.cluster_secret_file:
        return None
    with open(ns.cluster_secret_file, "rb") as f:
        return f.read().strip()


def _spark_context(ns: argparse.Namespace, job_graph: JobGraph) -> Any:
    from pyspark import SparkConf, SparkContext

    if is_local_master(ns.spark_master):
        # PySpark starts executors' Python from this variable: locally, this very interpreter, which
        # imports the engine. On a cluster the workers' own Python ("python3", or PYSPARK_PYTHON as
        # set for this process), which gets the engine by addPyFile.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster(ns.spark_master)
        .setAppName(f"{job_graph.name} ({job_graph.job_id})")
        .set("spark.ui.showConsoleProgress", "false")
    )
    for item in ns.conf or []:
        k, _, v = item.partition("=")
        conf.set(k, v)
    sc = SparkContext(conf=conf)
    sc.setLogLevel(ns.log_level)
    return sc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m millstream.engine.spark.driver")
    ap.add_argument("--job-id", required=True)
    ap.add_argument("--redis-url", help="the Redis URL (visible in ps: prefer --secrets-stdin)")
    ap.add_argument(
        "--secrets-stdin", action="store_true",
        help="read {\"redis_url\": ..., \"cluster_secret\": ...} as one JSON line from stdin (the JobManager's way)",
    )
    ap.add_argument("--spark-master", default="local[*]")
    ap.add_argument("--job-graph", required=True, help="the JobGraph as JSON")
    ap.add_argument("--user-code", help="the cloudpickled StreamGraph; default: from Redis")
    ap.add_argument(
        "--cluster-secret-file", help="file holding MILLSTREAM_CLUSTER_SECRET, to verify user code read from Redis"
    )
    ap.add_argument("--error-file", help="where to write the failure report")
    ap.add_argument("--conf", action="append", help="a Spark setting key=value (repeatable)")
    ap.add_argument("--log-level", default="WARN")
    ns = ap.parse_args(argv)
    # The job's code runs in this driver's Spark executors (its descendants, as the same user): they
    # must not open this process's memory, which holds the cluster secret and the Redis password.
    make_undumpable()
    ns.cluster_secret = None
    if ns.secrets_stdin:
        handover = json.loads(sys.stdin.readline() or "{}")
        sys.stdin.close()  # nothing more comes; user code finds nothing there
        ns.redis_url = ns.redis_url or handover.get("redis_url")
        ns.cluster_secret = handover.get("cluster_secret")
    if not ns.redis_url:
        ap.error("the Redis URL is missing: give --redis-url or --secrets-stdin")

    cancel = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        cancel.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    client = redis.Redis.from_url(ns.redis_url)
    sc = None
    watcher: _Watcher | None = None
    shipped: str | None = None  # this job's shipped files (and, for a remote master, the engine zip)
    try:
        with open(ns.job_graph) as f:
            job_graph = JobGraph.from_dict(json.load(f))
        from millstream.engine.compat.pyflink_alias import install as install_pyflink_alias

        install_pyflink_alias()  # user code may name pyflink.* modules
        # Files the program shipped (add_python_file): on the driver's import path before its code
        # loads, and on every executor's through addPyFile.
        shipped = tempfile.mkdtemp(prefix=f"millstream-pyfiles-{ns.job_id}-")
        materialized = materialize(_load_user_code(ns, client), shipped)
        if materialized.working_dir is not None:
            raise RuntimeError(
                "add_python_archive is not supported for BATCH jobs on Spark; run the job with --engine native"
            )
        python_path = materialized.python_path
        activate(python_path)
        stream_graph = cloudpickle.loads(materialized.graph)
        from millstream.engine.spark.translator import translate

        sc = _spark_context(ns, job_graph)
        if not is_local_master(ns.spark_master):
            sc.addPyFile(build_engine_archive(os.path.join(shipped, "millstream-engine.zip")))
        for n, entry in enumerate(python_path):
            sc.addPyFile(zip_entry(entry, os.path.join(shipped, f"shipped-{n}.zip")))
        plan = translate(sc, job_graph, stream_graph)
        watcher = _Watcher(sc, client, ns.job_id)
        watcher.secret = _secret(ns)
        watcher.cancel_requested = cancel  # the signal handler and the Redis key share one flag
        watcher.start()
        # A Spark job is one attempt whose records are final as they come (no checkpoints gate them).
        # Unbounded: the driver keeps no records for a replay (a Spark job has no checkpoint to restore).
        results = RedisCollectGateway(client, ns.job_id, gated=False, secret=_secret(ns))
        position = [0]
        collects = any(a.kind == "collect" for a in plan.actions)
        if collects:
            results.publish([collect.start(0, 0, False)])

        def on_collect(node_id: int, values: list[Any]) -> None:
            results.publish([collect.records(0, position[0], list(values))])
            position[0] += len(values)

        if cancel.is_set():
            return EXIT_CANCELED
        secret = _secret(ns)
        key = stdout_key(secret, ns.job_id) if secret else None  # executors can seal this job's lines, nothing else
        set_print_stream(sc, ns.redis_url, ns.job_id, key)  # print() sinks' lines reach attached clients
        plan.run(sc, on_collect, job_group=ns.job_id)
        if cancel.is_set():
            return EXIT_CANCELED
        if collects:
            results.publish([collect.end(0, position[0])])  # the client checks every result arrived
        return EXIT_FINISHED
    except UntranslatableJob as e:
        _report(ns, f"UntranslatableJob: {e}")
        return EXIT_UNTRANSLATABLE
    except BaseException as e:
        if cancel.is_set():
            return EXIT_CANCELED
        report = traceback.format_exc()
        cause = python_cause(str(e))
        if cause:
            report += "\nCaused by an exception in user code on a Spark executor:\n" + cause
        _report(ns, report)
        return EXIT_FAILED
    finally:
        if watcher is not None:
            watcher.stopped.set()
            watcher.join(5)
            if cancel.is_set() and sc is not None:
                _await_killed_tasks(sc, ns.job_id)
            elif sc is not None:
                _await_jobs_ended(sc, ns.job_id)
            watcher.publish()  # the final figures, kept after the context is gone
        if sc is not None:
            sc.stop()
        if shipped is not None:
            # After sc.stop(): the executors' Python workers are done with the files. Every BATCH job
            # made one of these directories, so leaving it would fill the JobManager's temp dir.
            shutil.rmtree(shipped, ignore_errors=True)


def _await_killed_tasks(sc: Any, job_group: str) -> None:
    """After cancelJobGroup, wait (briefly) until Spark has counted the killed tasks as ended,
    so the final progress does not show tasks of a cancelled job as still active."""
    _await_progress(sc, job_group, lambda p: all(s["numActiveTasks"] == 0 for s in p["stages"]))


def _await_jobs_ended(sc: Any, job_group: str) -> None:
    """Wait (briefly) until Spark's status tracker has seen every Spark job of the group end. It is
    fed by Spark's listener bus, asynchronously: on a loaded machine the action has returned while
    the tracker still counts the last tasks as running, and the final progress (what the dashboard
    and REST keep once the job ended) would show a finished stage unfinished."""
    _await_progress(sc, job_group, lambda p: all(j["status"] not in ("RUNNING", "UNKNOWN") for j in p["jobs"]))


def _await_progress(sc: Any, job_group: str, settled: Callable[[dict[str, Any]], bool], timeout_s: float = 10.0) -> None:
    """Poll the group's progress until ``settled(progress)``, for at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if settled(progress_snapshot(sc, job_group)):
                return
        except Exception:  # the context is going away: the final progress is what it is
            return
        time.sleep(0.1)


def _report(ns: argparse.Namespace, text: str) -> None:
    sys.stderr.write(text.rstrip() + "\n")
    sys.stderr.flush()
    if ns.error_file:
        with open(ns.error_file, "w") as f:
            f.write(text.rstrip() + "\n")


if __name__ == "__main__":
    sys.exit(main())
