"""The data-server watch without servers: status bookkeeping from PING results, which attempts' channels
need which server, and a JobMaster whose restart waits while a server its next attempt needs is down."""
from __future__ import annotations

from pathlib import Path

from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.jobmanager.data_server_monitor import DataServerHealth, ServerStatus
from millstream.engine.runtime.io import data_servers
from millstream.engine.runtime.io.channel import ChannelId
from tests.engine.jobmanager.test_job_master_savepoints import Harness, graph

RESTARTS = {"restart-strategy": {"type": "fixed-delay", "attempts": 2, "delay_ms": 10}}


def test_health_reports_each_change_once() -> None:
    h = DataServerHealth(["a:1/0", "b:2/0"])
    assert [s.status for s in h.states()] == [ServerStatus.UNKNOWN] * 2
    assert h.observe(0, 1000, 0.3) is None  # up at the first check: nothing to say
    assert h.observe(1, 1000, None, "Connection refused") == ServerStatus.DOWN  # down at the first check: said
    assert h.observe(1, 3000, None, "Connection refused") is None  # still down: said once
    assert h.down() == {1}
    b = h.states()[1]
    assert (b.status, b.since_ms, b.last_check_ms, b.error) == (ServerStatus.DOWN, 1000, 3000, "Connection refused")
    assert h.observe(0, 3000, None, "Timeout") == ServerStatus.DOWN
    assert h.observe(1, 5000, 0.5) == ServerStatus.UP
    assert h.down() == {0}
    b = h.states()[1]
    assert (b.status, b.since_ms, b.error, b.latency_ms) == (ServerStatus.UP, 5000, None, 0.5)
    assert h.states()[0].latency_ms == 0.3  # the last answered PING's, kept while down


def test_servers_of_attempt_are_the_servers_its_channels_hash_to() -> None:
    g = graph(parallelism=2)  # one HASH edge, 2 x 2 channels
    for attempt in range(6):
        expected = {
            data_servers.shard_of(ChannelId(g.job_id, 0, s, d, attempt), 5) for s in range(2) for d in range(2)
        }
        assert data_servers.servers_of_attempt(g, attempt, 5) == expected
    assert data_servers.servers_of_attempt(g, 0, 1) == {0}
    assert data_servers.servers_of_attempt(g, 0, 0) == set()
    assert data_servers.address("redis://:secret@host:7000/2") == "host:7000/2"
    assert data_servers.address("rediss://h") == "h:6379/0"


def _failed_task(h: Harness) -> None:
    h.jm.on_task_state(
        {"attempt": h.jm.eg.attempt, "vertex": "v-src", "subtask": 0, "state": "FAILED", "ts": int(h.clock() * 1000),
         "tm": "tm-1", "error": "ConnectionError: Error 111 connecting to data server"},
        h.pool,
    )
    h.report_all("CANCELED")  # the others confirm the cancel; the failed one stays FAILED


def test_a_restart_waits_while_its_data_server_is_down_without_using_attempts(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config=RESTARTS)).run()
    down: list[str] = ["data server 1 (b:2/0) is down and the next attempt has channels on it"]
    asked: list[int] = []

    def hold(job_graph, attempt: int) -> str | None:
        asked.append(attempt)
        return down[0] if down else None

    h.jm.restart_hold = hold
    _failed_task(h)
    assert h.jm.status is JobStatus.RESTARTING
    for _ in range(50):  # 5 s of backoffs: no deployment, no attempt used
        h.tick(100)
    assert h.jm.status is JobStatus.RESTARTING and h.jm.eg.attempt == 0
    assert set(asked) == {1}
    assert h.jm.restart.restarts == 0
    assert h.jm.eg.status_message.startswith("waiting to restart: data server 1")
    submits = len(h.gw.of("submit"))
    down.clear()  # the server answers again
    h.tick(100)
    assert h.jm.status is JobStatus.RUNNING and h.jm.eg.attempt == 1
    assert len(h.gw.of("submit")) > submits and h.jm.eg.status_message is None
    assert h.jm.restart.restarts == 1


def test_a_restart_held_past_the_slot_request_timeout_goes_ahead(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config={**RESTARTS, "slot.request.timeout": "2 s"})).run()
    h.jm.restart_hold = lambda g, a: "data server 0 (a:1/0) is down"
    _failed_task(h)
    h.tick(100)
    assert h.jm.status is JobStatus.RESTARTING
    h.tick(1500)
    assert h.jm.status is JobStatus.RESTARTING
    h.tick(600)  # 2.1 s held: it deploys (and, its server still down, would fail and count)
    assert h.jm.status is JobStatus.RUNNING and h.jm.eg.attempt == 1
