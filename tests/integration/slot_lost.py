"""Capturing a genuine slot_lost report for the replay tests: the attacker copies one before the
JobManager acts on it and pushes it again later.

The JobManager is stopped (SIGSTOP) so the report stays in its inbox long enough to be copied; then a
slot process is SIGKILLed and its TaskManager reports the loss. A JobManager stopped while it waited
in BLPOP would still take the next item pushed (Redis hands it to the blocked client), so an item it
will refuse is pushed first to take that place. When no report shows, the failure
says what each TaskManager logged last, so a CI flake explains itself.
"""
from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator

import psutil
import redis

from millstream.engine import redis_keys
from millstream.engine.taskexecutor import messages
from tests.integration.cluster import Cluster


def slot_processes(cluster: Cluster) -> list[psutil.Process]:
    """The slot processes (not multiprocessing's resource tracker) of the live TaskManagers."""
    children = [c for tm in cluster.taskmanagers if tm.poll() is None for c in psutil.Process(tm.pid).children()]
    return [c for c in children if "spawn_main" in " ".join(c.cmdline())]


@contextmanager
def jobmanager_stopped(cluster: Cluster) -> Iterator[psutil.Process]:
    """The JobManager paused (its inbox fills while it sleeps), resumed on the way out."""
    assert cluster.jobmanager is not None
    jobmanager = psutil.Process(cluster.jobmanager.pid)
    jobmanager.send_signal(signal.SIGSTOP)
    try:
        yield jobmanager
    finally:
        jobmanager.send_signal(signal.SIGCONT)


def capture_slot_lost_report(cluster: Cluster, timeout: float = 30) -> bytes:
    """SIGKILL one slot process while the JobManager is stopped and return the sealed slot_lost
    report its TaskManager pushed (still in the inbox). The JobManager resumes afterwards and acts
    on the genuine report: the job fails over."""
    rds = redis.Redis.from_url(cluster.redis_url)
    secret = cluster.env["MILLSTREAM_CLUSTER_SECRET"]  # the test's own, to find the report among the sealed ones
    captured: list[bytes] = []

    def find() -> bool:
        for raw in rds.lrange(redis_keys.JOBMANAGER_INBOX, 0, -1):
            try:
                kind = messages.open_message(raw, secret, redis_keys.JOBMANAGER_INBOX)["type"]
            except Exception:  # a forged item an earlier attack left in the inbox: not the report
                continue
            if kind == "slot_lost":
                captured.append(raw)
        return bool(captured)

    with jobmanager_stopped(cluster):
        # A JobManager stopped inside its BLPOP on the inbox still has that BLPOP pending at Redis: the
        # next item pushed goes to its socket, not into the list, and would never be seen here. This
        # item (unsealed: the JobManager refuses it when it wakes) takes that place first.
        rds.rpush(redis_keys.JOBMANAGER_INBOX, b"not a control message: it absorbs a pending BLPOP")
        victim = slot_processes(cluster)[0]
        victim.kill()  # a genuine slot_lost report from its TaskManager
        try:
            cluster.wait_for(find, timeout, "the slot_lost report")
        except AssertionError as e:
            raise AssertionError(f"{e} (killed slot pid {victim.pid})\n{_taskmanager_log_tails(cluster)}") from None
    return captured[0]


def _taskmanager_log_tails(cluster: Cluster, lines: int = 15) -> str:
    out = []
    for log in sorted(cluster.workdir.glob("taskmanager-*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        out.append(f"--- {log.name} (last {lines} lines)\n" + "\n".join(tail))
    return "\n".join(out)
