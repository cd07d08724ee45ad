"""Redis channels against the session's real valkey: frames, credits, blocking and the per-task links."""
from __future__ import annotations

import re
import threading
import time
from typing import Iterator

import pytest
import redis

from millstream.engine import redis_keys
from millstream.engine.runtime.io.channel import ChannelId, TaskCancelled, UnauthenticatedBuffer
from millstream.engine.runtime.io.record_writer import RecordWriter
from millstream.engine.runtime.io.redis_channels import RedisChannelFactory
from millstream.engine.runtime.io.serialization import END_OF_PARTITION, RECORDS, WATERMARK, MsgpackSerializer
from millstream.engine.runtime.partitioner import create_partitioner
from millstream.engine.runtime.task_metrics import TaskIOMetrics
from tests.engine.progress import until

SER = MsgpackSerializer()
SECRET = "channel-test-secret"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _cid(src: int) -> ChannelId:
    return ChannelId("job", 3, src, 0, 0)


def _drain(gate, ack: bool = True) -> list[tuple[int, int, object]]:
    seen = []
    while (item := gate.poll(0.01)) is not None:
        kind, a, _ = SER.decode(item[1])
        seen.append((item[0], kind, list(a) if kind == RECORDS else a))
        if kind == RECORDS and ack:
            gate.ack(item[0])
    return seen


def test_records_and_watermarks_cross_redis_in_order_in_one_element_per_frame(client: redis.Redis):
    cancelled = threading.Event()
    producer = RedisChannelFactory(client, 8, cancelled, SECRET)
    metrics = TaskIOMetrics()
    rw = RecordWriter(create_partitioner("FORWARD", 1), [producer.writer(_cid(0))], SER, metrics, 4, 10)
    rw.emit([1, 2], [1, 2])
    rw.emit_watermark(2)
    rw.emit([3, 4], [3, 4])  # full: one frame goes out
    rw.emit_watermark(4)
    rw.broadcast_event(END_OF_PARTITION)
    key = redis_keys.channel("job", 0, 3, 0, 0)
    assert client.llen(key) == 3  # the frame, the last watermark alone, end of partition
    gate = RedisChannelFactory(client, 8, cancelled, SECRET).gate([_cid(0)])
    assert _drain(gate) == [
        (0, RECORDS, [1, 2]), (0, WATERMARK, 2), (0, RECORDS, [3, 4]), (0, WATERMARK, 4), (0, END_OF_PARTITION, None)
    ]
    gate.close()  # one credit per element: the records frame's (acked), the watermark's and the end's
    tokens = client.lrange(redis_keys.credit("job", 0, 3, 0, 0), 0, -1)
    # Acks gathered between two writes go back as one token per channel carrying the latest number.
    assert 1 <= len(tokens) <= 3
    assert RedisChannelFactory(client, 8, cancelled, SECRET).writer(_cid(0))._count(tokens) == 3


def test_a_producer_without_credit_blocks_until_the_consumer_acks(client: redis.Redis):
    cancelled = threading.Event()
    writer = RedisChannelFactory(client, 2, cancelled, SECRET).writer(_cid(0))
    writer.send(SER.encode(RECORDS, [1]), True)
    writer.send(SER.encode(RECORDS, [2]), True)
    assert writer.credits == 0
    gate = RedisChannelFactory(client, 2, cancelled, SECRET).gate([_cid(0)])
    done = threading.Event()
    blocked_for: list[float] = []

    def third() -> None:
        blocked_for.append(writer.send(SER.encode(RECORDS, [3]), True))
        done.set()

    t = threading.Thread(target=third)
    t.start()
    # No credit: the third buffer waits, through three polls for credit (0.1 s each) that found none.
    until(lambda: writer.credit_polls >= 3, "the producer to poll for credit")
    assert not done.is_set()
    ch, first = gate.poll(0.05)
    assert SER.decode(first)[1] == (1,) and not done.is_set()  # read but not yet processed: no credit back
    gate.ack(ch)
    gate.poll(0.05)  # the credit rides with this BLPOP
    assert done.wait(5)
    t.join()
    assert blocked_for[0] >= 0.25  # the three empty polls, reported as time blocked
    assert [v for _, _, v in _drain(gate)] == [[3]]
    gate.close()


def test_forged_or_copied_credit_tokens_are_never_counted(client: redis.Redis):
    """Someone with the Redis URL pushes tokens to lift the bound on unread buffers: a plain one, one
    sealed for another channel, and a copy of a genuine one. Only the consumer's new tokens count."""
    cancelled = threading.Event()
    writer = RedisChannelFactory(client, 1, cancelled, SECRET).writer(_cid(0))
    key = redis_keys.credit("job", 0, 3, 0, 0)
    writer.send(SER.encode(RECORDS, [1]), True)
    gate = RedisChannelFactory(client, 1, cancelled, SECRET).gate([_cid(0)])
    ch, _ = gate.poll(0.05)
    gate.ack(ch)
    gate.close()  # the genuine token goes back
    genuine = client.lindex(key, 0)
    other = RedisChannelFactory(client, 1, cancelled, SECRET).gate([_cid(1)])
    other.ack(0)
    other.close()
    client.rpush(key, b"1", client.lindex(redis_keys.credit("job", 0, 3, 1, 0), 0), genuine, genuine)
    writer.send(SER.encode(RECORDS, [2]), True)  # takes the genuine token
    assert writer.credits == 0
    done, gave_up = threading.Event(), threading.Event()

    def send_one_more() -> None:
        try:
            writer.send(SER.encode(RECORDS, [3]), True)
            done.set()
        except TaskCancelled:
            gave_up.set()  # the task was cancelled while it waited for credit: what this test expects

    t = threading.Thread(target=send_one_more, daemon=True)
    t.start()
    client.rpush(key, genuine, b"1")
    # Every token was read (the list is empty) and weighed (two more polls since), none counted: the
    # producer still has no credit, the bound holds.
    until(lambda: client.llen(key) == 0, "the producer to read the tokens")
    read = writer.credit_polls
    until(lambda: writer.credit_polls >= read + 2, "the producer to poll for credit again")
    assert not done.is_set() and writer.credits == 0
    cancelled.set()
    t.join(2)
    assert gave_up.is_set()


def test_credit_tokens_deleted_from_redis_are_announced_again_and_the_bound_still_holds(client: redis.Redis):
    """Someone with write access deletes every credit token while the producer is out of credit and
    the consumer has taken everything: the consumer announces its credit again once the channel is
    quiet, the producer resumes, and the copies never grant more than the consumer freed."""
    cancelled = threading.Event()
    writer = RedisChannelFactory(client, 2, cancelled, SECRET).writer(_cid(0))
    key = redis_keys.credit("job", 0, 3, 0, 0)
    gate = RedisChannelFactory(client, 2, cancelled, SECRET).gate([_cid(0)])
    writer.send(SER.encode(RECORDS, [1]), True)
    writer.send(SER.encode(RECORDS, [2]), True)
    assert writer.credits == 0
    assert [v for _, _, v in _drain(gate)] == [[1], [2]]
    assert client.delete(key) == 1  # both tokens gone: nothing the consumer does would send another
    sent = threading.Event()
    t = threading.Thread(target=lambda: (writer.send(SER.encode(RECORDS, [3]), True), sent.set()), daemon=True)
    t.start()
    until(lambda: writer.credit_polls >= 2, "the producer to poll for the deleted credit")
    assert not sent.is_set()
    deadline = time.monotonic() + 5
    got = []
    while not sent.is_set() and time.monotonic() < deadline:
        got.append(gate.poll(0.05))  # a quiet channel: its latest token goes out again
    assert sent.is_set(), "the producer stayed blocked on credit deleted from Redis"
    t.join()
    assert writer.credits == 1  # the two credits freed, less the one spent: not one more
    for _ in range(40):  # announced again and again while quiet: still no more credit
        got.append(gate.poll(0.05))
        writer.credits += writer._count(client.lpop(key, 10) or ())
    assert writer.credits == 1 and client.llen(key) <= 1
    assert [SER.decode(item[1])[1] for item in got if item] == [(3,)]
    cancelled.set()
    gate.close()


def test_a_blocked_wait_for_credit_ends_when_the_task_is_cancelled(client: redis.Redis):
    cancelled = threading.Event()
    writer = RedisChannelFactory(client, 1, cancelled, SECRET).writer(_cid(0))
    writer.send(b"x", True)
    threading.Timer(0.2, cancelled.set).start()
    with pytest.raises(TaskCancelled):
        writer.send(b"y", True)


def test_a_blocked_channel_is_not_read_and_other_channels_are(client: redis.Redis):
    cancelled = threading.Event()
    producer = RedisChannelFactory(client, 8, cancelled, SECRET)
    for src in (0, 1):
        producer.writer(_cid(src)).send(SER.encode(RECORDS, [src]), True)
    gate = RedisChannelFactory(client, 8, cancelled, SECRET).gate([_cid(0), _cid(1)])
    gate.block(0)
    assert [(ch, v) for ch, _, v in _drain(gate)] == [(1, [1])]
    gate.unblock(0)
    assert [(ch, v) for ch, _, v in _drain(gate)] == [(0, [0])]
    gate.close()


def test_each_task_uses_its_own_connections_not_the_shared_pool(client: redis.Redis):
    cancelled = threading.Event()
    factory = RedisChannelFactory(client, 8, cancelled, SECRET)
    w1, w2 = factory.writer(_cid(0)), factory.writer(_cid(1))
    assert w1.link is w2.link  # one link for the task's writers
    w1.send(b"a", True)
    gate = factory.gate([_cid(0)])
    assert gate.poll(0.05) == (0, b"a")
    names = [c.get("id") for c in client.client_list()]
    assert len(names) >= 3  # the test's client, the writers' link, the gate's link
    assert client.connection_pool._created_connections >= 3


def _clients(client: redis.Redis) -> int:
    return len(client.client_list())


def test_a_tasks_connections_go_back_to_the_pool_when_it_ends(redis_url: str):
    """Issue 13 item 6: links took connections and never returned them; after ~50 tasks the pool's
    max_connections was spent. Hundreds of tasks now leave the pool and the server flat."""
    observer = redis.Redis.from_url(redis_url)
    client = redis.Redis.from_url(redis_url, max_connections=10)
    cancelled = threading.Event()
    try:
        for i in range(300):  # 30 times the pool's limit
            factory = RedisChannelFactory(client, 8, cancelled, SECRET)
            factory.writer(_cid(0)).send(b"x%d" % i, True)
            gate = factory.gate([_cid(0)])
            assert gate.poll(0.5) == (0, b"x%d" % i)
            gate.ack(0)
            gate.close()
            factory.close()
            if i == 10:
                warm = _clients(observer)
        assert client.connection_pool._created_connections <= 3
        assert _clients(observer) == warm
    finally:
        client.close()
        observer.close()


def test_a_link_closed_with_replies_unread_is_not_handed_on_half_read(redis_url: str):
    client = redis.Redis.from_url(redis_url)
    try:
        factory = RedisChannelFactory(client, 8, threading.Event(), SECRET)
        w = factory.writer(_cid(0))
        w.send(b"pending", True)  # pipelined: its reply is still unread
        assert w.link.unread
        factory.close()
        factory.close()  # idempotent
        # The next user of the pool's connection gets its own replies, not the RPUSH's.
        assert client.ping() is True
        assert len(client.lrange(redis_keys.channel("job", 0, 3, 0, 0), 0, -1)) in (0, 1)
        assert client.connection_pool._created_connections <= 2
    finally:
        client.close()


def test_a_buffer_pushed_by_someone_with_only_the_redis_url_fails_the_task_undecoded(client: redis.Redis):
    import pickle

    cancelled = threading.Event()
    gate = RedisChannelFactory(client, 8, cancelled, SECRET).gate([_cid(0)])
    forged = SER.encode(RECORDS, [1])  # a well-formed buffer, but not sealed
    client.rpush(redis_keys.channel("job", 0, 3, 0, 0), forged)
    with pytest.raises(UnauthenticatedBuffer, match=r"unauthenticated buffer on channel ms:"):
        gate.poll(0.5)
    # Sealed with another cluster's secret: refused the same way.
    other = RedisChannelFactory(client, 8, cancelled, "another-secret").writer(_cid(0))
    other.send(pickle.dumps(1), True)
    other.close()
    gate = RedisChannelFactory(client, 8, cancelled, SECRET).gate([_cid(0)])
    with pytest.raises(UnauthenticatedBuffer):
        gate.poll(0.5)


def test_an_element_replayed_into_another_channel_or_twice_in_its_own_is_refused(client: redis.Redis):
    cancelled = threading.Event()
    writer = RedisChannelFactory(client, 8, cancelled, SECRET).writer(_cid(0))
    writer.send(SER.encode(RECORDS, [1]), True)
    writer.close()
    key0, key1 = redis_keys.channel("job", 0, 3, 0, 0), redis_keys.channel("job", 0, 3, 1, 0)
    sealed = client.lrange(key0, 0, -1)[0]
    client.rpush(key1, sealed)  # the same bytes into the channel of subtask 1
    client.rpush(key0, sealed)  # and again into its own channel, after itself
    gate = RedisChannelFactory(client, 8, cancelled, SECRET).gate([_cid(1)])
    with pytest.raises(UnauthenticatedBuffer, match=re.escape(key1)):
        gate.poll(0.5)
    gate = RedisChannelFactory(client, 8, cancelled, SECRET).gate([_cid(0)])
    assert SER.decode(gate.poll(0.5)[1])[1] == (1,)
    with pytest.raises(UnauthenticatedBuffer):
        gate.poll(0.5)  # the replayed copy carries sequence number 0 again


def test_a_writer_does_not_wait_for_redis_while_its_replies_are_merely_late(client: redis.Redis):
    """Pushes are pipelined: with Redis holding its replies back (CLIENT PAUSE), a writer keeps
    sending past the point where it reads the replies that have arrived, and waits only when a
    thousand are owed. Waiting at the first point put a server round trip into one send in 64,
    the latency markers' p99 on a loaded machine."""
    from millstream.engine.runtime.io.redis_channels import _MAX_UNREAD, _MAX_UNREAD_WAIT, RedisLink

    link = RedisLink(client)
    key = "ms:test:late-replies"
    client.delete(key)
    sends = 4 * _MAX_UNREAD
    assert sends < _MAX_UNREAD_WAIT
    client.execute_command("CLIENT", "PAUSE", 3000, "WRITE")
    try:
        t0 = time.monotonic()
        for i in range(sends):
            link.send([("RPUSH", key, i)], [None])
        took = time.monotonic() - t0
    finally:
        client.execute_command("CLIENT", "UNPAUSE")
    assert took < 1.0, took  # with the pause in force the whole time, a wait would have taken 3 s
    link.read_unread()
    assert client.llen(key) == sends
    link.close()
    client.delete(key)
