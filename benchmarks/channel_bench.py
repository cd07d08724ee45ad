"""The data plane alone: CPU per buffer of a channel's producer and consumers, no operators.

One producer process writes NBUF pre-encoded 1,024-record buffers of the reference workload's records
round-robin over 2 channels (sealed, credit-based, as a RecordWriter's channels do) to 2 consumer
processes that read, decode and acknowledge them, over a private valkey. Each process reports its own
CPU seconds (user + system), which a shared machine's load moves far less than wall time; the figure is
microseconds per buffer. Run it with each checkout's interpreter to compare trees:

    .venv/bin/python benchmarks/channel_bench.py [NBUF]

(see docs/performance.md, 2026-11-28, for what it found).
"""
from __future__ import annotations

import multiprocessing as mp
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402

from millstream.engine.runtime.io.channel import ChannelId  # noqa: E402
from millstream.engine.runtime.io.redis_channels import RedisChannelFactory  # noqa: E402
from millstream.engine.runtime.io.serialization import RECORDS, MsgpackSerializer  # noqa: E402

SECRET = "s" * 32  # any cluster secret: both sides share it
NBUF = int(sys.argv[1]) if len(sys.argv) > 1 else 20000


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def produce(port: int, q: mp.Queue) -> None:
    client = redis.Redis(port=port)
    ser = MsgpackSerializer()
    payloads = [ser.encode(RECORDS, [("w%d" % ((n + k) % 1000), 1) for n in range(1024)]) for k in range(8)]
    factory = RedisChannelFactory(client, 8, threading.Event(), SECRET)
    writers = [factory.writer(ChannelId("job", 0, 1, 0, d)) for d in range(2)]
    c0, t0 = cpu(), time.perf_counter()
    for i in range(NBUF):
        writers[i % 2].send(payloads[i % 8], True)
    for w in writers:
        w.close()
    q.put(("producer", cpu() - c0, time.perf_counter() - t0))


def consume(port: int, q: mp.Queue, dst: int) -> None:
    client = redis.Redis(port=port)
    ser = MsgpackSerializer()
    gate = RedisChannelFactory(client, 8, threading.Event(), SECRET).gate([ChannelId("job", 0, 1, 0, dst)])
    got, c0, t0 = 0, 0.0, 0.0
    while got < NBUF // 2:
        item = gate.poll(0.1)
        if item is None:
            continue
        if got == 0:  # counted from the first buffer: the start-up is not the data plane's
            c0, t0 = cpu(), time.perf_counter()
        ser.decode(item[1])
        gate.ack(item[0])
        got += 1
    gate.close()
    q.put(("consumer", cpu() - c0, time.perf_counter() - t0))


if __name__ == "__main__":
    from millstream.backend.embedded_redis import redis_url_of, start_embedded_redis

    with tempfile.TemporaryDirectory(prefix="millstream-channel-bench-") as tmp:
        server = start_embedded_redis(Path(tmp))
        port = redis.Redis.from_url(redis_url_of(server)).connection_pool.connection_kwargs["port"]
        try:
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            ps = [ctx.Process(target=consume, args=(port, q, 0)), ctx.Process(target=consume, args=(port, q, 1)),
                  ctx.Process(target=produce, args=(port, q))]
            for p in ps:
                p.start()
            res = [q.get() for _ in ps]
            for p in ps:
                p.join()
        finally:
            server.stop()
    prod = [r for r in res if r[0] == "producer"][0]
    cons = [r for r in res if r[0] == "consumer"]
    print(f"machine: {machine()}")
    print(f"producer cpu {1e6 * prod[1] / NBUF:.1f} us/buf (wall {prod[2]:.2f} s); "
          f"consumers cpu {1e6 * sum(r[1] for r in cons) / NBUF:.1f} us/buf")
