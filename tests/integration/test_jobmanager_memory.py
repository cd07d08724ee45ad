"""Issue 13: JobManager memory stays flat however many jobs it has run.

The soak (benchmarks/soak.py) showed the JobManager growing by ~35 KB per finished job although
finished jobs leave its memory for SQL: recovery, ``/overview`` and the dashboard's throughput
sampler (every 2 s) loaded every stored job, JobGraph included, so the process's high-water mark
grew with its history. Here real short jobs run on a real cluster and leave memory; their rows are
then copied in SQLite to a long history (the rows 1,500 such jobs leave behind), and a JobManager
started on that history must stay within a few MiB of one started on the short one.
"""
from __future__ import annotations

import re
import signal
import sqlite3
from pathlib import Path

import psutil

from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).resolve().parents[2] / "benchmarks" / "rolling_count_job.py"
HISTORY = 1500
MIB = 2**20


def _restart_jobmanager(c: Cluster) -> None:
    assert c.jobmanager is not None
    c.jobmanager.send_signal(signal.SIGTERM)
    c.jobmanager.wait(30)
    c.start_jobmanager()


def _settled_rss(c: Cluster) -> float:
    """The JobManager's resident MiB once it recovered and answered the cluster overview (what the
    CLI, the dashboard and Prometheus read over and over)."""
    assert c.jobmanager is not None
    for _ in range(3):
        assert c.http.get("/overview").status_code == 200
    return psutil.Process(c.jobmanager.pid).memory_info().rss / MIB


def _copy_history(db: Path, total: int) -> None:
    with sqlite3.connect(db) as con:
        cols = [r[1] for r in con.execute("PRAGMA table_info(jobs)")]
        sources = [r[0] for r in con.execute("SELECT jid FROM jobs")]
        have = len(sources)
        for i in range(have, total):
            src = sources[i % len(sources)]
            picked = ",".join("?" if c == "jid" else c for c in cols)
            con.execute(f"INSERT INTO jobs ({','.join(cols)}) SELECT {picked} FROM jobs WHERE jid = ?", (f"{i:032x}", src))


def test_jobmanager_memory_does_not_grow_with_the_number_of_jobs_it_ran(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    c.env["MILLSTREAM_JOB_ARCHIVE_AFTER_MS"] = "200"
    try:
        c.start(taskmanagers=1, slots=2)
        for i in range(2):
            res = c.run(PROGRAM, "2000", "2", f"short-{i}")
            assert res.returncode == 0, res.stderr[-2000:]
        log = tmp_path / "jobmanager.log"
        c.wait_for(lambda: len(re.findall(r"left memory for the JobStore", log.read_text())) >= 2, 60,
                   "the short jobs to leave JobManager memory")
        overview = c.overview()
        assert (overview["jobs-finished"], overview["jobs-running"]) == (2, 0), overview

        _restart_jobmanager(c)
        short = _settled_rss(c)
        _copy_history(tmp_path / "var" / "millstream.db", HISTORY)
        _restart_jobmanager(c)
        c.wait_for(lambda: c.overview()["taskmanagers"] >= 1, 60, "the TaskManager to be seen again")
        long = _settled_rss(c)
        overview = c.overview()
        assert overview["jobs-finished"] == HISTORY, overview
        # Before the fix: about +40 MiB for this history (recovery and each /overview decoded every
        # stored job). A JobManager's RSS varies by a MiB or two between starts.
        assert long - short < 12, f"JobManager RSS {short:.1f} MiB with 2 jobs, {long:.1f} MiB with {HISTORY}"
        # It still runs jobs: one more goes through and the history is intact.
        res = c.run(PROGRAM, "2000", "2", "after-history")
        assert res.returncode == 0, res.stderr[-2000:]
    finally:
        c.stop()
