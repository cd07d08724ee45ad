"""Channels sharded over three real valkey servers (MILLSTREAM_DATA_REDIS_URLS): placement by a stable
hash, order and credits per channel, alignment blocking, no busy polling, forged elements, a dead server."""
from __future__ import annotations

import os
import signal
import threading
import time
import zlib
from pathlib import Path
from typing import Iterator

import pytest
import redis

from millstream.backend.embedded_redis import embedded_redis_alive, redis_url_of, start_embedded_redis
from millstream.engine import redis_keys
from millstream.engine.runtime.io import data_servers
from millstream.engine.runtime.io.channel import ChannelId, TaskCancelled
from millstream.engine.runtime.io.channel import UnauthenticatedBuffer
from millstream.engine.runtime.io.redis_channels import RedisChannelFactory
from millstream.engine.runtime.io.serialization import RECORDS, MsgpackSerializer
from millstream.engine.runtime.io.sharded_gate import ShardedInputGate

SER = MsgpackSerializer()
SECRET = "sharded-channel-test-secret"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list]:
    started = [start_embedded_redis(tmp_path_factory.mktemp(f"data{i}")) for i in range(3)]
    yield started
    for s in started:
        if embedded_redis_alive(s):
            s.stop()


@pytest.fixture
def clients(servers: list) -> Iterator[list[redis.Redis]]:
    cs = [redis.Redis.from_url(redis_url_of(s)) for s in servers]
    for c in cs:
        c.flushall()
    yield cs
    for c in cs:
        c.close()


def _records(values: list) -> bytes:
    return SER.encode(RECORDS, values)


def _cids(n: int, job: str = "job") -> list[ChannelId]:
    return [ChannelId(job, 0, src, 0, 0) for src in range(n)]


def _spread(cids: list[ChannelId], servers: int = 3) -> set[int]:
    return {data_servers.shard_of(c, servers) for c in cids}


def test_the_server_is_crc32_of_the_channel_key_the_same_in_any_process():
    cid = ChannelId("j1", 5, 1, 3, 2)  # edge 5, subtasks 1 -> 3, attempt 2
    key = redis_keys.channel("j1", 2, 5, 1, 3)
    assert data_servers.shard_of(cid, 3) == zlib.crc32(key.encode()) % 3
    assert data_servers.shard_of(cid, 1) == 0
    # 64 channels land on every one of 3 servers, and a new attempt moves channels around
    many = [ChannelId("j1", 0, s, d, 0) for s in range(8) for d in range(8)]
    assert _spread(many) == {0, 1, 2}
    moved = [ChannelId("j1", 0, s, d, 1) for s in range(8) for d in range(8)]
    assert [data_servers.shard_of(c, 3) for c in many] != [data_servers.shard_of(c, 3) for c in moved]
    assert data_servers.parse_urls(" redis://a:1/0, redis://b:2/0 ") == ["redis://a:1/0", "redis://b:2/0"]


def test_each_channel_and_its_credits_live_on_its_own_server_and_arrive_in_order(clients):
    cancelled = threading.Event()
    cids = _cids(12)
    assert _spread(cids) == {0, 1, 2}
    producer = RedisChannelFactory(clients, 4, cancelled, SECRET)
    writers = [producer.writer(c) for c in cids]
    for w in writers:
        for n in range(3):
            w.send(_records([n]), True)
        w.close()
    for c in cids:
        key = redis_keys.channel(c.job_id, c.attempt, c.edge, c.src, c.dst)
        home = data_servers.shard_of(c, 3)
        assert [cl.llen(key) for cl in clients] == [3 if i == home else 0 for i in range(3)]
    gate_factory = RedisChannelFactory(clients, 4, cancelled, SECRET)
    gate = gate_factory.gate(cids)
    assert isinstance(gate.inner, ShardedInputGate)
    seen: dict[int, list[int]] = {}
    deadline = time.monotonic() + 10
    while sum(map(len, seen.values())) < 36 and time.monotonic() < deadline:
        item = gate.poll(0.1)
        if item is not None:
            _, records, _ = SER.decode(item[1])
            seen.setdefault(item[0], []).extend(records)
            gate.ack(item[0])
    gate.close()
    assert seen == {i: [0, 1, 2] for i in range(12)}
    # One sealed credit token per consumed element, on the channel's own server.
    for c in cids:
        ckey = redis_keys.credit(c.job_id, c.attempt, c.edge, c.src, c.dst)
        home = data_servers.shard_of(c, 3)
        assert [cl.llen(ckey) for cl in clients] == [3 if i == home else 0 for i in range(3)]
    producer.close()
    gate_factory.close()


def test_credits_bound_the_unread_buffers_and_return_across_servers(clients):
    """Two credits per channel: a producer blocks after two unread buffers and goes on as the
    sharded gate returns credits; 200 buffers per channel all arrive, in order."""
    cancelled = threading.Event()
    cids = _cids(6)
    per_channel = 200
    errors: list[BaseException] = []

    def produce() -> None:
        factory = RedisChannelFactory(clients, 2, cancelled, SECRET)
        try:
            writers = [factory.writer(c) for c in cids]
            for n in range(per_channel):
                for w in writers:
                    w.send(_records([n]), True)
            for w in writers:
                w.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            factory.close()

    t = threading.Thread(target=produce)
    t.start()
    factory = RedisChannelFactory(clients, 2, cancelled, SECRET)
    gate = factory.gate(cids)
    got: dict[int, list[int]] = {i: [] for i in range(len(cids))}
    max_unread = 0
    deadline = time.monotonic() + 60
    while sum(map(len, got.values())) < per_channel * len(cids) and time.monotonic() < deadline:
        for c in cids:
            key = redis_keys.channel(c.job_id, c.attempt, c.edge, c.src, c.dst)
            max_unread = max(max_unread, clients[data_servers.shard_of(c, 3)].llen(key))
        item = gate.poll(0.1)
        if item is not None:
            got[item[0]].extend(SER.decode(item[1])[1])
            gate.ack(item[0])
    t.join(10)
    gate.close()
    factory.close()
    assert not errors, errors
    assert got == {i: list(range(per_channel)) for i in range(len(cids))}
    assert max_unread <= 2


def test_credit_tokens_deleted_from_a_data_server_are_announced_again(clients):
    """As for a single server (test_redis_channels.py): every credit token of a channel is deleted
    while its producer is out of credit and the sharded gate has taken everything; the gate announces
    its latest credit again on that channel's own server, the producer resumes, and no more credit
    appears than the gate freed."""
    cancelled = threading.Event()
    cids = _cids(6)
    assert len(_spread(cids)) > 1
    target = cids[0]
    home = clients[data_servers.shard_of(target, 3)]
    key = redis_keys.credit(target.job_id, target.attempt, target.edge, target.src, target.dst)
    producer = RedisChannelFactory(clients, 2, cancelled, SECRET)
    writer = producer.writer(target)
    factory = RedisChannelFactory(clients, 2, cancelled, SECRET)
    gate = factory.gate(cids)
    assert isinstance(gate.inner, ShardedInputGate)
    writer.send(_records([1]), True)
    writer.send(_records([2]), True)
    assert writer.credits == 0
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        item = gate.poll(0.1)
        if item is not None:
            got.append(SER.decode(item[1])[1])
            gate.ack(item[0])
    assert got == [(1,), (2,)]
    for _ in range(3):
        gate.poll(0.05)  # the two acks go out with the next read
    assert home.delete(key) == 1  # both tokens gone
    sent = threading.Event()
    t = threading.Thread(target=lambda: (writer.send(_records([3]), True), sent.set()), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not sent.is_set() and time.monotonic() < deadline:
        item = gate.poll(0.05)  # quiet: its latest token goes out again
        if item is not None:
            got.append(SER.decode(item[1])[1])
    assert sent.is_set(), "the producer stayed blocked on credit deleted from its data server"
    t.join()
    assert writer.credits == 1  # the two credits freed, less the one spent: not one more
    for _ in range(30):
        item = gate.poll(0.05)
        if item is not None:
            got.append(SER.decode(item[1])[1])
        writer.credits += writer._count(home.lpop(key, 10) or ())
    assert writer.credits == 1 and home.llen(key) <= 1
    assert got == [(1,), (2,), (3,)]
    cancelled.set()
    gate.close()
    producer.close()
    factory.close()


def test_a_blocked_channel_holds_its_elements_until_unblocked(clients):
    cancelled = threading.Event()
    cids = _cids(6)
    producer = RedisChannelFactory(clients, 8, cancelled, SECRET)
    for c in cids:
        w = producer.writer(c)
        w.send(_records(["a"]), True)
        w.send(_records(["b"]), True)
        w.close()
    factory = RedisChannelFactory(clients, 8, cancelled, SECRET)
    gate = factory.gate(cids)
    gate.block(0)  # as barrier alignment does
    seen = []
    for _ in range(40):
        item = gate.poll(0.05)
        if item is not None:
            seen.append((item[0], SER.decode(item[1])[1][0]))
            gate.ack(item[0])
    assert sorted(seen) == sorted((i, x) for i in range(1, 6) for x in "ab")
    gate.unblock(0)
    rest = []
    for _ in range(20):
        item = gate.poll(0.05)
        if item is not None:
            rest.append((item[0], SER.decode(item[1])[1][0]))
    assert rest == [(0, "a"), (0, "b")]
    gate.close()
    producer.close()
    factory.close()


def test_an_idle_sharded_gate_waits_in_the_servers_instead_of_polling(clients, servers):
    """Idle for a second: each server sees about one BLPOP per poll slice (0.1 s), not a busy loop."""
    cancelled = threading.Event()
    factory = RedisChannelFactory(clients, 8, cancelled, SECRET)
    gate = factory.gate(_cids(9))
    assert isinstance(gate.inner, ShardedInputGate)
    gate.poll(0.1)
    before = [c.info("commandstats").get("cmdstat_blpop", {}).get("calls", 0) for c in clients]
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:
        assert gate.poll(0.2) is None
    after = [c.info("commandstats").get("cmdstat_blpop", {}).get("calls", 0) for c in clients]
    calls = [a - b for a, b in zip(after, before)]
    assert all(4 <= n <= 15 for n in calls), calls
    cancelled.set()
    with pytest.raises(TaskCancelled):
        gate.poll(0.1)
    gate.close()
    factory.close()


def test_an_element_not_sealed_for_its_channel_fails_the_task(clients):
    cancelled = threading.Event()
    cids = _cids(6)
    c = cids[0]
    key = redis_keys.channel(c.job_id, c.attempt, c.edge, c.src, c.dst)
    clients[data_servers.shard_of(c, 3)].rpush(key, _records(["forged"]))
    factory = RedisChannelFactory(clients, 8, cancelled, SECRET)
    gate = factory.gate(cids)
    with pytest.raises(UnauthenticatedBuffer, match="unauthenticated buffer on channel"):
        for _ in range(20):
            gate.poll(0.05)
    factory.close()


def test_a_dead_data_server_fails_the_reading_task(tmp_path: Path):
    """SIGKILL one of the gate's servers: the next poll raises a connection error (the task fails
    and the restart strategy takes over), within a poll slice or two, rather than hanging."""
    started = [start_embedded_redis(tmp_path / f"d{i}") for i in range(3)]
    try:
        cls = [redis.Redis.from_url(redis_url_of(s)) for s in started]
        factory = RedisChannelFactory(cls, 8, threading.Event(), SECRET)
        gate = factory.gate(_cids(9))
        gate.poll(0.1)
        os.kill(started[1].pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(redis.ConnectionError):
            for _ in range(50):
                gate.poll(0.1)
        assert time.monotonic() - t0 < 3
        factory.close()
    finally:
        for s in started:
            if embedded_redis_alive(s):
                s.stop()
