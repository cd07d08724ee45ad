"""The print() output of a BATCH job on real Spark is kept with the job in SQL once it ended (bounded,
the truncation said), so ``GET /jobs/{id}/stdout`` and the dashboard's Output tab still show it after
the job left memory, after its print stream left Redis (it lasts an hour) and across a JobManager
restart (SIGKILL)."""
from __future__ import annotations

import importlib.util
import re
import signal
from collections import Counter
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
from markupsafe import escape

from millstream.engine import redis_keys
from millstream.engine.jobmanager.job_store import OUTPUT_KEPT_LINES
from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
TOTAL = 12_000 + 12_000 // 50 + 3
FIXTURES = Path(__file__).parent / "fixtures"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pyspark") is None, reason="needs pyspark")


def _job_id(stdout: str) -> str:
    return re.findall(r"^Job ([0-9a-f]{32}) ", stdout, re.M)[0]


def _all_lines(c: Cluster, jid: str) -> dict:
    """Every line the endpoint holds, read page by page as a client would."""
    lines: list[str] = []
    body = c.http.get(f"/jobs/{jid}/stdout", params={"offset": 0}).json()
    first = body
    while True:
        lines.extend(body["lines"])
        if body["next-offset"] >= body["total"]:
            break
        body = c.http.get(f"/jobs/{jid}/stdout", params={"offset": body["next-offset"]}).json()
    return {**first, "lines": lines}


def test_a_spark_jobs_output_outlives_redis_and_a_jobmanager_restart(tmp_path: Path) -> None:
    db = tmp_path / "millstream.db"
    c = Cluster(tmp_path / "c", database_url=f"sqlite:///{db}")
    (tmp_path / "c").mkdir(exist_ok=True)
    c.env["MILLSTREAM_JOB_ARCHIVE_AFTER_MS"] = "0"  # the job leaves memory as soon as it ended
    try:
        c.start(taskmanagers=1, slots=1)
        log = tmp_path / "c" / "jobmanager.log"

        # A small job: its output is kept whole.
        res = c.run(PROGRAMS / "printing.py", "batch", timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        small = _job_id(res.stdout)
        assert c.job(small)["job-type"] == "BATCH" and "spark" in c.job(small)
        expected = (FIXTURES / "printing.batch.pyflink.out").read_text().splitlines()
        expected.remove("after execute")  # the client printed that, not the job
        c.wait_for(lambda: f"job {small} (FINISHED) left memory" in log.read_text(), 60, "the job to leave memory")

        # A job printing more than is kept: 12,000 values, 240 "map saw" lines, the 3 keys' sums (BATCH: final only).
        res = c.run(PROGRAMS / "printing.py", "batch", "12000", timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        big = _job_id(res.stdout)
        c.wait_for(lambda: f"job {big} (FINISHED) left memory" in log.read_text(), 60, "the big job to leave memory")
        head = c.http.get(f"/jobs/{big}/stdout", params={"offset": 0, "maxLines": 5}).json()
        # Lines older than the kept ones come from Redis (lines the attached client read already are
        # not shown again from that far back: the replay guard's window, engine/security/replay.py).
        assert not head["kept"] and head["total"] == TOTAL
        printed = Counter(
            [str(v * 10) for v in range(12_000)] + [f"map saw {v}" for v in range(0, 12_000, 50)]
            + [f"sums> ('k{k}', {sum(v for v in range(0, 12_000, 40) if v % 3 == k)})" for k in range(3)]
        )

        # In SQL, bounded: the newest lines.
        engine = sa.create_engine(f"sqlite:///{db}")
        with engine.connect() as conn:
            rows = dict(conn.execute(sa.text("SELECT jid, total FROM job_output")).all())
        engine.dispose()
        assert rows == {small: len(expected), big: TOTAL}

        # The print streams leave Redis (an hour later, or a Redis restart), and the JobManager dies.
        client = redis.Redis.from_url(c.redis_url)
        for jid in (small, big):
            client.delete(redis_keys.job_stdout(jid), redis_keys.job_stdout_total(jid))
        assert c.jobmanager is not None
        c.jobmanager.send_signal(signal.SIGKILL)
        c.jobmanager.wait()
        c.start_jobmanager()

        got = _all_lines(c, small)
        assert got["kept"] and got["ended"] and got["state"] == "FINISHED"
        assert got["dropped"] == 0 and got["first-held"] == 0 and got["total"] == len(expected)
        assert Counter(got["lines"]) == Counter(expected)

        kept = _all_lines(c, big)
        first = TOTAL - OUTPUT_KEPT_LINES
        assert kept["kept"] and kept["total"] == TOTAL and len(kept["lines"]) == OUTPUT_KEPT_LINES
        assert kept["offset"] == kept["dropped"] == kept["first-held"] == first  # asked from 0: the truncation is said
        assert not Counter(kept["lines"]) - printed  # the newest lines it printed, each once
        tail = c.http.get(f"/jobs/{big}/stdout", params={"offset": TOTAL - 2}).json()
        assert tail["lines"] == kept["lines"][-2:] and tail["dropped"] == 0 and tail["next-offset"] == TOTAL

        # The dashboard offers the Output tab and opens it at the newest lines, saying what was not kept.
        page = c.http.get(f"/ui/jobs/{big}/output").text
        assert 'data-tab="output"' in page and f"Lines {TOTAL - 999}–{TOTAL} of {TOTAL}, as kept with the job" in page
        assert f"the first {first} are gone" in page and str(escape(kept["lines"][-1])) in page
        earlier = c.http.get(f"/ui/jobs/{big}/output/lines", params={"offset": 0}).text
        assert f"Lines {first + 1}–{first + 1000} of {TOTAL}" in earlier and "disabled>Earlier" in earlier
        small_page = c.http.get(f"/ui/jobs/{small}/output").text
        assert "Truncated" not in small_page and str(escape(expected[0])) in small_page
    finally:
        c.stop()

