"""A TaskManager's metrics store and its Prometheus endpoint: a real HTTP server on a free port, fed
through a real pipe as a slot process feeds it."""
from __future__ import annotations

import multiprocessing
import threading
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

import pytest

from millstream.engine.metrics.groups import MetricRegistry
from millstream.engine.metrics.task_report import TaskMetricsReport, decode_reports, encode_reports
from millstream.engine.taskexecutor.metrics_server import (
    STALE_AFTER_S, MetricsServer, SlotMetricsReceiver, TaskManagerCollector, TaskMetricsStore,
)


def _report(subtask: int = 0, attempt: int = 0, records: int = 5, ended: bool = False) -> TaskMetricsReport:
    return TaskMetricsReport("j" * 32, "job", "v" * 32, "Map", subtask, attempt, {"read-records": records}, ended=ended)


def test_store_keeps_the_latest_per_subtask_and_forgets_ended_stale_and_lost_ones() -> None:
    now = [0.0]
    store = TaskMetricsStore(clock=lambda: now[0])
    store.update(0, [_report(0, records=1), _report(1, records=2)])
    store.update(0, [_report(0, records=3)])
    assert sorted(r.figures["read-records"] for r in store.reports()) == [2, 3]
    store.update(0, [_report(1, ended=True)])
    assert [r.subtask for r in store.reports()] == [0]
    store.update(1, [_report(1, attempt=1)])
    store.update(1, [_report(1, attempt=0, ended=True)])  # an older attempt's end leaves the newer one
    assert sorted(r.subtask for r in store.reports()) == [0, 1]
    store.drop_slot(1)
    assert [r.subtask for r in store.reports()] == [0]
    now[0] += STALE_AFTER_S + 1
    assert store.reports() == []


def _scrape(port: int, **kw) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5, **kw)


def test_endpoint_serves_what_a_slot_sent_through_its_pipe() -> None:
    store, stopping = TaskMetricsStore(), threading.Event()
    receiver = SlotMetricsReceiver(store, stopping)
    reader, writer = multiprocessing.get_context("spawn").Pipe(duplex=False)
    receiver.add(0, reader)
    receiver.start()
    server = MetricsServer(TaskManagerCollector(store, "tm-1", "127.0.0.1"), "127.0.0.1", 0)
    server.start()
    try:
        writer.send_bytes(b"\xc1 not msgpack")  # dropped; the pipe stays in use
        writer.send_bytes(encode_reports([_report(records=7)]))
        deadline = time.time() + 5
        while time.time() < deadline and not store.reports():
            time.sleep(0.05)
        r = _scrape(server.port)
        assert r.status_code == 200
        families = {f.name: f.samples for f in text_string_to_metric_families(r.text)}
        sample = families["flink_taskmanager_job_task_numRecordsIn"][0]
        assert sample.value == 7 and sample.labels["tm_id"] == "tm_1"
        assert httpx.get(f"http://127.0.0.1:{server.port}/other", timeout=5).status_code == 404
        writer.close()  # the slot died: the receiver drops its pipe and keeps serving
        receiver.remove_slot(0)
        assert "numRecordsIn" not in _scrape(server.port).text
    finally:
        stopping.set()
        server.stop()


def test_endpoint_needs_the_token_when_reads_are_protected() -> None:
    server = MetricsServer(TaskManagerCollector(TaskMetricsStore(), "tm", "h"), "127.0.0.1", 0, token="s3cret")
    server.start()
    try:
        assert _scrape(server.port).status_code == 401
        assert _scrape(server.port, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert _scrape(server.port, headers={"Authorization": "bearer s3cret"}).status_code == 200
    finally:
        server.stop()


def test_reports_cross_the_pipe_as_msgpack_with_user_metrics() -> None:
    registry = MetricRegistry()
    group = registry.operator_group("Map").add_group("g")
    group.counter("c").inc(2)
    group.add_group("kind", "even").distribution("d").update(3)
    group.gauge("obj", lambda: object())  # text on the wire
    report = TaskMetricsReport("j", "job", "v", "Map", 0, 1, {"read-records": 4, "currentInputWatermark": None},
                               tuple(registry.snapshot()), (("Window", 2),), ended=True,
                               operator_ids=(("Map", "a" * 32), ("Window", "b" * 32)))
    (back,) = decode_reports(encode_reports([report]))
    assert back.figures == report.figures and back.late_dropped_by_operator == (("Window", 2),) and back.ended
    assert back.operator_ids == (("Map", "a" * 32), ("Window", "b" * 32))
    by_id = {m.identifier: m for m in back.user_metrics}
    assert by_id["Map.g.c"].value == 2
    assert by_id["Map.g.kind.even.d"].value == (1, 3, 3, 3) and by_id["Map.g.kind.even.d"].variables == (("kind", "even"),)
    assert by_id["Map.g.kind.even.d"].path == ("Map", "g", "kind", "d")
    assert by_id["Map.g.obj"].value.startswith("<object object")
    for bad in (b"", b"\x93\x01\x02\x03", encode_reports([])[:0] + b"\x91\x01"):
        with pytest.raises(ValueError):
            decode_reports(bad)


def test_a_slot_never_waits_for_a_taskmanager_that_does_not_read(redis_url: str) -> None:
    """Reports go through a small queue and a sender thread: with the pipe full, samples are dropped
    and the caller (a task thread, or the loop publishing to Redis) goes on at once."""
    import redis

    from millstream.engine.taskexecutor.slot_process import SlotConfig, SlotExecutor

    reader, writer = multiprocessing.get_context("spawn").Pipe(duplex=False)
    client = redis.Redis.from_url(redis_url)
    slot = SlotExecutor(SlotConfig("tm-test", 0, redis_url, cluster_secret="s" * 32), client, metrics_pipe=writer)
    sender = threading.Thread(target=slot._taskmanager_sender, daemon=True)
    sender.start()
    big = [_report(subtask=i, records=i) for i in range(2000)]  # far more than a pipe's buffer per report
    started = time.monotonic()
    for _ in range(20):
        slot._send_to_taskmanager(big)
    assert time.monotonic() - started < 5
    assert reader.poll(5)  # what fit in the pipe is readable
    assert len(decode_reports(reader.recv_bytes())) == 2000
    slot.stopping.set()
    reader.close()  # the blocked sender sees the TaskManager gone and ends
    sender.join(5)
    assert not sender.is_alive()
    client.close()
