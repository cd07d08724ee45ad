"""Which data Redis server holds a channel: client-side sharding by a stable hash of the channel.

With ``MILLSTREAM_DATA_REDIS_URLS`` set, channels (and their credits) are spread over several Redis
servers; control messages, registration, heartbeats and checkpoint coordination stay on ``REDIS_URL``.
Producer and consumer compute the same server from the channel alone, in any process: the hash is
CRC-32 of the channel's key (job, attempt, edge, subtask pair), never Python's per-process ``hash``.
The attempt is part of it, so a restarted job's channels land elsewhere than the failed attempt's.

The list is fixed for the cluster's life: a channel's server is ``crc32(key) mod n``, so adding or
removing a server moves almost every channel, and producer and consumer of a running attempt would
disagree. Changing it means stop-with-savepoint, restart every process with the new list, resume.
"""
from __future__ import annotations

import hashlib
import zlib
from urllib.parse import urlsplit

from millstream.engine import redis_keys
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.runtime.io.channel import ChannelId
from millstream.engine.runtime.partitioner import connected_targets
from millstream.engine.security.mac import open_text, seal_text


def shard_of(channel: ChannelId, servers: int) -> int:
    """The index, in the list of data servers, of the server holding ``channel`` and its credits."""
    if servers <= 1:
        return 0
    key = redis_keys.channel(channel.job_id, channel.attempt, channel.edge, channel.src, channel.dst)
    return zlib.crc32(key.encode()) % servers


def servers_of_attempt(job_graph: JobGraph, attempt: int, servers: int) -> set[int]:
    """The data servers an attempt of the job would put channels on: every producer/consumer pair of
    every edge between its vertices (chained operators use none). Used to hold a restart while one of
    them is down, rather than deploy tasks that fail at their first write."""
    if servers <= 0:
        return set()
    out: set[int] = set()
    for e in job_graph.edges:
        src_p = job_graph.vertex(e.source_vertex).parallelism
        dst_p = job_graph.vertex(e.target_vertex).parallelism
        for src in range(src_p):
            for dst in connected_targets(e.ship_strategy, src, src_p, dst_p):
                out.add(shard_of(ChannelId(job_graph.job_id, e.index, src, dst, attempt), servers))
                if len(out) == servers:
                    return out
    return out


def address(url: str) -> str:
    """A data server as shown to users (REST, metrics, logs): host, port and database, never a password."""
    u = urlsplit(url)
    host = f"[{u.hostname}]" if u.hostname and ":" in u.hostname else u.hostname
    return f"{host}:{u.port or 6379}{u.path or '/0'}"


def parse_urls(value: str | None) -> list[str]:
    """MILLSTREAM_DATA_REDIS_URLS: comma- or whitespace-separated Redis URLs (empty: the control Redis)."""
    return [u for u in (value or "").replace(",", " ").split() if u]


def fingerprint(urls: list[str] | tuple[str, ...]) -> str:
    """What every process must agree on: the data servers (host, port, database), in order, passwords
    left out. The JobManager publishes its own; a TaskManager given another list refuses tasks, since
    it would put a job's channels on servers the other side never reads. "" means no data servers."""
    if not urls:
        return ""
    places = []
    for url in urls:
        u = urlsplit(url)
        places.append(f"{u.scheme}://{u.hostname}:{u.port or 6379}{u.path or '/0'}")
    return hashlib.sha256("\n".join(places).encode()).hexdigest()[:16]


FINGERPRINT_KIND = "data_servers"


def seal_fingerprint(secret: str | bytes | None, value: str) -> str:
    """The fingerprint as the JobManager publishes it: sealed with the cluster secret, because a slot
    refuses every task when the published one differs from its own, and anyone able to write to
    Redis could otherwise make every deploy fail."""
    return seal_text(secret, FINGERPRINT_KIND, (redis_keys.DATA_SERVERS,), value)


def open_fingerprint(secret: str | bytes | None, raw: str | bytes) -> str:
    """The fingerprint sealed in ``raw``; raises Unauthenticated when it was not sealed with ``secret``."""
    return open_text(secret, FINGERPRINT_KIND, (redis_keys.DATA_SERVERS,), raw)


class DataServersMismatch(RuntimeError):
    """This TaskManager's MILLSTREAM_DATA_REDIS_URLS is not the JobManager's."""
