"""execute_and_collect on a real cluster: exactly once across TaskManager SIGKILLs with exactly-once
checkpoints, and bounded Redis memory for a job whose client reads nothing."""
from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import msgpack
import redis

from millstream.engine import redis_keys
from millstream.engine.client.collect_result_buffer import CollectResultBuffer
from millstream.engine.runtime.collect import MAX_KEPT_BYTES as MAX_UNACKED_BYTES
from millstream.engine.runtime.collect import CollectEntry
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from tests.engine.progress import until
from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
N = 60_000


def _subtasks(c: Cluster, jid: str) -> list[dict]:
    return [st for v in c.job(jid)["vertices"] for st in c.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]]


def test_every_collected_update_reaches_the_client_exactly_once_across_taskmanager_kills(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    rng = random.Random(13)
    out = tmp_path / "received.json"
    try:
        c.start(taskmanagers=2, slots=2)
        run = c.start_run(PROGRAMS / "collected_count.py", str(N), "3000", str(out), options=("-p", "2"))
        jid = c.wait_new_job(set())
        # The collect sink runs at parallelism 1 (as Flink's): 2 sources, 2 counters, 1 sink.
        c.wait_for(lambda: len(_subtasks(c, jid)) == 5, 60, "the job's subtasks")
        assert sorted(v["parallelism"] for v in c.job(jid)["vertices"]) == [1, 2, 2]
        completed_before = 0
        for kill in range(2):  # the second lands on a restored attempt
            c.wait_for(
                lambda: all(st["attempt"] == kill and st["status"] == "RUNNING" for st in _subtasks(c, jid)),
                60, f"attempt {kill} to run",
            )
            c.wait_for(
                lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] > completed_before,
                30, "a checkpoint of this attempt",
            )
            completed_before = c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]
            # A random point between checkpoints: updates are in flight, some not yet committed.
            time.sleep(rng.uniform(0.1, 0.9))
            victim = rng.choice([p for p in c.taskmanagers if p.poll() is None])
            c.replace_taskmanager(victim, slots=2)
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-3000:]
        received = [tuple(u) for u in json.loads(out.read_text())]
        expected = {(f"k{k}", n) for k in range(40) for n in range(1, N // 40 + 1)}
        dupes = [u for u, n in Counter(received).items() if n > 1]
        assert not dupes, f"{len(received) - len(set(received))} duplicates, e.g. {dupes[:5]}"
        assert set(received) == expected, f"{len(expected - set(received))} missing"
        # Per key, the updates arrive in order: no restart rolled the client back.
        per_key: dict[str, list[int]] = {}
        for key, n in received:
            per_key.setdefault(key, []).append(n)
        assert all(v == list(range(1, N // 40 + 1)) for v in per_key.values())
        assert c.job(jid)["state"] == "FINISHED"
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] >= 2
        # Everything was acknowledged: nothing of the job's results is left in Redis.
        client = redis.Redis.from_url(c.redis_url)
        assert client.llen(redis_keys.collect(jid)) == 0
    finally:
        c.stop()


def test_an_unread_unbounded_collect_keeps_redis_bounded_and_offsets_are_validated(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    run = None
    try:
        c.start(taskmanagers=1, slots=2)
        run = c.start_run(PROGRAMS / "unread_collect.py")
        jid = c.wait_new_job(set())
        c.wait_running(jid)
        client = redis.Redis.from_url(c.redis_url)
        key = redis_keys.collect(jid)

        def held() -> int:
            # Every element counted (the default samples 5, the first of which is the tiny START).
            return int(client.memory_usage(key, samples=0) or 0)

        def ack_looks() -> int:
            """HGETs Redis served: here only the collect sink's looks at its client's acknowledgement
            (every 20 ms while it waits; the JobManager reads it only when a client fetches)."""
            return int(client.info("commandstats").get("cmdstat_hget", {}).get("calls", 0))

        # The source would write ~50 MB/s; the sink stops at the cap and stays there.
        c.wait_for(lambda: held() >= MAX_UNACKED_BYTES * 0.9, 60, "the unread results to reach the cap")
        samples: list[int] = []
        looks = ack_looks()
        until(lambda: samples.append(held()) or ack_looks() >= looks + 100, "the sink to wait for an acknowledgement")
        assert max(samples) < MAX_UNACKED_BYTES * 1.5, samples
        entries = client.llen(key)
        looks = ack_looks()
        # It looked again and again, found no acknowledgement, and wrote nothing more.
        until(lambda: ack_looks() >= looks + 50, "the sink to look for an acknowledgement again")
        assert client.llen(key) == entries
        assert c.job(jid)["state"] == "RUNNING"
        # A reader may now drain it: each read acknowledges the previous entries and Redis frees them;
        # the records it says it holds (attempt, acked) free the sink, which writes on.
        http = c.http
        assert http.get(f"/jobs/{jid}/results", params={"offset": 10**30}).status_code == 400
        assert http.get(f"/jobs/{jid}/results", params={"offset": entries + 5}).status_code == 400
        assert http.get(f"/jobs/{jid}/results", params={"offset": 0, "acked": 3}).status_code == 400  # no attempt
        offset, buffer, ser = 0, CollectResultBuffer(), MsgpackSerializer()
        for _ in range(entries + 1):
            ack = buffer.ack()
            params = {"offset": offset} if ack is None else {"offset": offset, "attempt": ack.attempt, "acked": ack.position}
            r = http.get(f"/jobs/{jid}/results", params=params)
            assert r.status_code == 200
            batches = msgpack.unpackb(r.content, raw=False)["batches"]
            offset += len(batches)
            list(buffer.add(CollectEntry.decode(b, ser) for b in batches))
        assert buffer.held() >= 3 * 1024
        c.wait_for(lambda: client.llen(key) > 0, 30, "the sink to write on once acknowledged")
        assert http.get(f"/jobs/{jid}/results", params={"offset": 0}).status_code == 400  # acknowledged
        # Once the job ends, what nobody read is left to expire, not kept for good.
        http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
        c.wait_state(jid, ("CANCELED",), 30)
        c.wait_for(lambda: 0 < client.ttl(key) <= 3600, 10, "the unread results to get a TTL")
    finally:
        if run is not None:
            run.kill()
            run.wait()
        c.stop()


def test_limit_returns_the_first_records_in_order_and_cancels_the_job(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    try:
        c.start(taskmanagers=1, slots=2)
        res = c.run(PROGRAMS / "limited_collect.py", "2500")
        assert res.returncode == 0, res.stderr[-3000:]
        first = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("[")))
        assert first == [3 * i for i in range(2500)]
        (job,) = c.http.get("/jobs/overview").json()["jobs"]
        assert c.wait_state(job["jid"], ("CANCELED",), 30)["state"] == "CANCELED"
    finally:
        c.stop()
