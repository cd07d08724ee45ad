"""Issue 14, hole 4, for BATCH jobs on Spark: the driver the JobManager starts inherits none of its
secrets and shows no Redis password on its command line, so the job's own code (run by the driver's
executors, its descendants) finds neither in its environment, nor in any ancestor's
``/proc/<pid>/environ`` or command line. A real driver process on a real valkey, local[1]."""
from __future__ import annotations

import json
import sys

import pytest

from millstream.engine.datastream.connectors.number_seq import NumberSequenceSource
from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.resourcemanager.slot_pool import SlotPool
from tests.spark.test_spark_job_master import collected, make_master, run_until_terminal

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")

SECRETS = {
    "MILLSTREAM_CLUSTER_SECRET": "cluster-secret-f00d",
    "MILLSTREAM_AUTH_TOKEN": "auth-token-beef",
    "DATABASE_URL": "postgresql://u:db-password-cafe@db/x",
    "REDIS_URL": "redis://:redis-password-d00d@redis:6379/0",
}


def snooping(env):
    def snoop(n):
        import json as j
        import os

        names = ("MILLSTREAM_CLUSTER_SECRET", "MILLSTREAM_AUTH_TOKEN", "DATABASE_URL", "REDIS_URL")
        found = {"own": {k: v for k, v in os.environ.items() if k in names}, "ancestors": []}
        pid = os.getppid()
        while pid > 1:
            entry = {"pid": pid}
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    entry["cmdline"] = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
                with open(f"/proc/{pid}/environ", "rb") as f:
                    entry["environ"] = [e for e in f.read().decode("utf-8", "replace").split("\0") if e.split("=", 1)[0] in names]
            except OSError as e:
                entry["error"] = e.strerror
            found["ancestors"].append(entry)
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        return j.dumps(found)

    return env.from_source(NumberSequenceSource(1, 1), None, "one").map(snoop)


def test_the_jobs_code_finds_no_secret_in_the_driver_or_above(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The JobManager's environment, as the driver would inherit it without its own.
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    jm, store, client = make_master(snooping, redis_url, spark_master="local[1]")
    pool = SlotPool()
    assert jm.try_schedule(pool)
    driver_pid = jm.process.pid
    with open(f"/proc/{driver_pid}/cmdline", "rb") as f:
        assert redis_url.encode() not in f.read()  # ps shows no Redis URL (nor its password)
    run_until_terminal(jm, pool)
    assert jm.status is JobStatus.FINISHED, store.list_exceptions(jm.job_id)
    (report,) = collected(client, jm.job_id)
    found = json.loads(report)
    assert found["own"] == {}, found["own"]
    assert any(a["pid"] == driver_pid for a in found["ancestors"]), found  # the walk passed the driver
    text = json.dumps(found["ancestors"])
    leaked = [v for v in SECRETS.values() if v in text]
    assert not leaked, found["ancestors"]
    assert redis_url not in text, "an ancestor's command line shows the Redis URL"
