"""Redis Streams source and sink against a real valkey-server: split states, rewinding, idempotent commits."""
from __future__ import annotations

import pytest
import redis

from millstream.backend.embedded_redis import start_embedded_redis
from millstream.engine.datastream.connectors.redis_streams import MARKER_KEY, RedisStreamSink, RedisStreamSource, parse_id
from millstream.engine.runtime.operators.base import OperatorContext
from millstream.engine.runtime.operators.sinks import WriterSinkOperator
from millstream.engine.runtime.task_metrics import TaskIOMetrics
from tests.backend.test_redis_tls import OPENSSL, REDIS_SERVER, tls_redis  # noqa: F401  (a TLS server fixture)


def _drain(reader, batch=4):
    out = []
    while (b := reader.poll_batch(batch)) is not None:
        out.extend(b)
    return out


def _fill(client, stream: str, n: int, prefix: str = "") -> None:
    for i in range(n):
        client.xadd(stream, {"value": f"{prefix}{i}"})


def _entries(client, stream: str) -> list[str]:
    return [f[b"value"].decode() for _, f in client.xrange(stream)]


def _operator(sink, subtask=0, attempt=0) -> WriterSinkOperator:
    ctx = OperatorContext(
        job_id="job1", task_name="sink", operator_name="Redis Stream Sink", subtask=subtask, parallelism=2,
        max_parallelism=128, attempt=attempt, job_type="STREAMING", metrics=TaskIOMetrics(),
    )
    op = WriterSinkOperator(sink, ctx, {"sink": "writer", "node_id": 7})
    op.open()
    return op


def _checkpoint(op, cid):
    op.prepare_snapshot_pre_barrier(cid)
    return op.snapshot_state()


@pytest.fixture
def client(redis_url: str):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def test_a_bounded_source_reads_each_stream_to_its_end_at_start(redis_url, client) -> None:
    _fill(client, "a", 5, "a")
    _fill(client, "b", 3, "b")
    src = RedisStreamSource(redis_url, ["b", "a", "missing"], bounded=True)
    readers = [src.create_reader(i, 2) for i in range(2)]
    _fill(client, "a", 2, "late")  # after the start: beyond the stop id
    got = [v for r in readers for v in _drain(r)]
    assert sorted(got) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(3)])


def test_a_restored_reader_rewinds_to_the_entry_after_its_last_id(redis_url, client) -> None:
    _fill(client, "s", 20)
    src = RedisStreamSource(redis_url, "s", bounded=True)
    reader = src.create_reader(0, 1)
    first = reader.poll_batch(7)
    position = reader.snapshot()
    reader.poll_batch(5)  # read after the checkpoint, then the task dies
    reader.close()
    (stream, last, stop) = position[0]
    assert stream == "s" and parse_id(last) < parse_id(stop)
    rest = _drain(src.create_reader(0, 1, position))
    assert first + rest == [str(i) for i in range(20)]


def test_an_unbounded_source_waits_for_new_entries_and_dollar_starts_now(redis_url, client) -> None:
    _fill(client, "u", 3, "old")
    src = RedisStreamSource(redis_url, "u", start_id="$")
    reader = src.create_reader(0, 1)
    # "$" became a concrete id at the start (the newest entry then), so the position can be replayed.
    start = reader.snapshot()
    assert start == [["u", client.xrange("u")[-1][0].decode(), None]]
    assert reader.poll_batch(10) == []  # blocks briefly, never ends
    _fill(client, "u", 2, "new")
    assert _poll_until(reader, 2) == ["new0", "new1"]
    assert _poll_until(src.create_reader(0, 1, start), 2) == ["new0", "new1"]


def _poll_until(reader, n: int) -> list[str]:
    got: list[str] = []
    for _ in range(40):
        got += reader.poll_batch(10)
        if len(got) >= n:
            break
    return got


def test_entries_without_the_field_are_named(redis_url, client) -> None:
    client.xadd("f", {"other": "x"})
    with pytest.raises(ValueError, match="has no field 'value'"):
        RedisStreamSource(redis_url, "f", bounded=True).create_reader(0, 1).poll_batch(10)
    assert RedisStreamSource(redis_url, "f", bounded=True, field=None).create_reader(0, 1).poll_batch(10) == [{"other": "x"}]


def test_bad_arguments_are_named(redis_url) -> None:
    with pytest.raises(ValueError, match="not a Redis stream id"):
        RedisStreamSource(redis_url, "s", start_id="yesterday")
    with pytest.raises(ValueError, match="stream names"):
        RedisStreamSource(redis_url, [])
    with pytest.raises(ValueError, match="redis:// or rediss:// URL"):
        RedisStreamSink("localhost:6379", "s")
    with pytest.raises(ValueError, match="maxlen"):
        RedisStreamSink(redis_url, "s", maxlen=0)


def test_the_sink_writes_a_checkpoints_batch_only_when_it_completes(redis_url, client) -> None:
    op = _operator(RedisStreamSink(redis_url, "out"))
    op.process_batch(["a", "b"], None)
    _checkpoint(op, 1)
    op.process_batch(["c"], None)
    _checkpoint(op, 2)
    assert _entries(client, "out") == []
    op.notify_checkpoint_complete(1)
    assert _entries(client, "out") == ["a", "b"]
    op.notify_checkpoint_complete(2)
    assert _entries(client, "out") == ["a", "b", "c"]
    assert client.get(MARKER_KEY.format(stream="out", writer="job1/7/0")) == b"2"


def test_a_replayed_commit_after_recovery_writes_nothing_twice(redis_url, client) -> None:
    op = _operator(RedisStreamSink(redis_url, "out"))
    op.process_batch(["a", "b"], None)
    state = _checkpoint(op, 1)
    op.notify_checkpoint_complete(1)  # committed; the task fails before anything else
    op.process_batch(["c"], None)  # after checkpoint 1: replayed by the sources
    _checkpoint(op, 2)  # never completes
    restored = _operator(RedisStreamSink(redis_url, "out"), attempt=1)
    restored.restore_state(state)  # commits checkpoint 1's batch again: the marker says it is done
    restored.process_batch(["c", "d"], None)
    _checkpoint(restored, 3)
    restored.notify_checkpoint_complete(3)
    assert _entries(client, "out") == ["a", "b", "c", "d"]


def test_a_batch_completed_but_not_notified_is_committed_on_restore(redis_url, client) -> None:
    op = _operator(RedisStreamSink(redis_url, "out"))
    op.process_batch(["a"], None)
    state = _checkpoint(op, 1)
    _operator(RedisStreamSink(redis_url, "out"), attempt=1).restore_state(state)
    assert _entries(client, "out") == ["a"]


def test_end_of_input_commits_the_rest_once(redis_url, client) -> None:
    op = _operator(RedisStreamSink(redis_url, "out"))
    op.process_batch(["a"], None)
    state = _checkpoint(op, 1)
    op.notify_checkpoint_complete(1)
    op.process_batch(["b", "c"], None)
    op.end_input()
    assert _entries(client, "out") == ["a", "b", "c"]
    # A failure after the end (another task) replays from checkpoint 1: nothing is written again.
    again = _operator(RedisStreamSink(redis_url, "out"), attempt=1)
    again.restore_state(state)
    again.process_batch(["b"], None)
    _checkpoint(again, 2)
    again.notify_checkpoint_complete(2)
    again.process_batch(["c"], None)
    again.end_input()
    assert _entries(client, "out") == ["a", "b", "c"]


def test_password_urls_work(tmp_path) -> None:
    server = start_embedded_redis(tmp_path / "pw", password="s3cret")
    try:
        url = f"redis://:s3cret@{server.host}:{server.port}/0"
        op = _operator(RedisStreamSink(url, "out"))
        op.process_batch(["x"], None)
        op.end_input()
        assert RedisStreamSource(url, "out", bounded=True).create_reader(0, 1).poll_batch(10) == ["x"]
    finally:
        server.stop()


def test_rescaled_resumes_read_every_entry_exactly_once(redis_url, client) -> None:
    from millstream.engine.checkpoint.rescale import redistribute_splits

    expected = []
    for s in ("s1", "s2", "s3"):
        _fill(client, s, 30, s + "-")
        expected += [f"{s}-{i}" for i in range(30)]
    src = RedisStreamSource(redis_url, ["s1", "s2", "s3"], bounded=True)
    seen: list[str] = []
    positions = None
    for stage, parallelism in enumerate((2, 3, 1)):
        old, positions = positions, {}
        for i in range(parallelism):
            splits = None if old is None else redistribute_splits(old, i, parallelism, len(old))
            reader = src.create_reader(i, parallelism, splits)
            seen.extend(_drain(reader) if stage == 2 else (reader.poll_batch(7) or []))
            positions[i] = reader.snapshot()
            reader.close()
    assert sorted(seen) == sorted(expected)


@pytest.mark.skipif(not (REDIS_SERVER and OPENSSL), reason="needs Debian's redis-server and openssl")
def test_tls_urls_work(tls_redis) -> None:
    url, _ = tls_redis  # rediss://...?ssl_ca_certs=<test CA>, as REDIS_URL takes it
    op = _operator(RedisStreamSink(url, "tls-out"))
    op.process_batch(["x", "y"], None)
    op.end_input()
    op.close()
    reader = RedisStreamSource(url, "tls-out", bounded=True).create_reader(0, 1)
    assert _drain(reader) == ["x", "y"]
    reader.close()
