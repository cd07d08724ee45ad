"""execute_and_collect's Redis list against the session's real valkey: acknowledgement by offset,
trimming, bad offsets, and the sink waiting for the client's sealed acknowledgement."""
from __future__ import annotations

import threading
from typing import Iterator

import pytest
import redis

from millstream.engine import redis_keys
from millstream.engine.runtime import collect
from millstream.engine.runtime.io.channel import TaskCancelled
from millstream.engine.runtime.io.redis_collect import (
    RedisCollectGateway,
    ResultOffsetError,
    UnauthenticatedResult,
    fetch_results,
    record_ack,
)
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from tests.engine.progress import until

SER = MsgpackSerializer()
SECRET = "collect-test-secret"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def values(raw: list[bytes]) -> list:
    return [v for e in (collect.CollectEntry.decode(r, SER) for r in raw) if e.kind == collect.RECORDS for v in e.values]


def test_reading_from_an_offset_acknowledges_and_drops_what_came_before(client: redis.Redis) -> None:
    gw = RedisCollectGateway(client, "j1", gated=False, secret=SECRET)
    gw.publish([collect.start(0, 0, False)])
    for i in range(10):
        gw.publish([collect.records(0, i, [i])])
    first = fetch_results(client, "j1", 0, max_entries=4, secret=SECRET)
    assert len(first) == 4 and values(first) == [0, 1, 2]
    assert client.llen(redis_keys.collect("j1")) == 11  # nothing acknowledged yet
    assert values(fetch_results(client, "j1", 4, max_entries=100, secret=SECRET)) == list(range(3, 10))
    assert client.llen(redis_keys.collect("j1")) == 7
    assert fetch_results(client, "j1", 11, secret=SECRET) == []
    assert client.llen(redis_keys.collect("j1")) == 0
    fetch_results(client, "j1", 11, secret=SECRET)  # asking again for the same offset (a retried request) is fine


def test_an_acknowledged_or_unwritten_offset_is_refused(client: redis.Redis) -> None:
    gw = RedisCollectGateway(client, "j2", gated=False, secret=SECRET)
    gw.publish([collect.start(0, 0, False), collect.records(0, 0, ["a"])])
    fetch_results(client, "j2", 0, secret=SECRET)  # a client's first fetch is at 0
    fetch_results(client, "j2", 1, secret=SECRET)
    with pytest.raises(ResultOffsetError, match="acknowledged"):
        fetch_results(client, "j2", 0, secret=SECRET)
    with pytest.raises(ResultOffsetError, match="past"):
        fetch_results(client, "j2", 3, secret=SECRET)
    with pytest.raises(ResultOffsetError, match="past"):
        fetch_results(client, "j2", 2**53, secret=SECRET)


def test_the_sink_waits_for_the_clients_sealed_acknowledgement_and_ignores_forged_ones(client: redis.Redis) -> None:
    gw = RedisCollectGateway(client, "j3", gated=True, secret=SECRET)
    assert gw.acknowledged(0) == 0  # nothing acknowledged yet
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(gw.await_acknowledged(0, 5)), daemon=True)
    t.start()
    # Someone with only the Redis URL writes an acknowledgement: it does not open, the sink keeps waiting.
    client.hset(redis_keys.collect_meta("j3"), "ack", collect.Ack(0, 100).encode())
    record_ack(client, "j3", collect.Ack(0, 4), "another-clusters-secret")
    record_ack(client, "other-job", collect.Ack(0, 100), SECRET)
    client.hset(redis_keys.collect_meta("j3"), "ack", client.hget(redis_keys.collect_meta("other-job"), "ack"))
    # The sink has read the forged acknowledgements (two more looks than when the last was written,
    # so at least one look began after it) and kept waiting.
    forged = gw.looks
    until(lambda: gw.looks >= forged + 2, "the sink to look at the forged acknowledgement")
    assert t.is_alive() and gw.acknowledged(0) == 0
    record_ack(client, "j3", collect.Ack(0, 3), SECRET)  # what the JobManager writes for the client
    short = gw.looks
    until(lambda: gw.looks >= short + 2, "the sink to look at an acknowledgement short of its position")
    assert t.is_alive() and gw.acknowledged(0) == 3 and gw.acknowledged(1) == 0  # another attempt's
    record_ack(client, "j3", collect.Ack(0, 7), SECRET)
    t.join(5)
    assert got == [7]


def test_a_waiting_sink_ends_when_its_task_is_cancelled(client: redis.Redis) -> None:
    cancelled = threading.Event()
    gw = RedisCollectGateway(client, "j4", gated=True, cancelled=cancelled, secret=SECRET)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            gw.await_acknowledged(0, 1)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            errors.append(e)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    until(lambda: gw.looks >= 2, "the sink to look for an acknowledgement")
    assert t.is_alive() and not errors  # it waits for an acknowledgement, until it is cancelled
    cancelled.set()
    t.join(2)
    assert len(errors) == 1 and isinstance(errors[0], TaskCancelled)


def test_after_redis_lost_the_results_a_new_list_continues_at_the_clients_offset(client: redis.Redis) -> None:
    gw = RedisCollectGateway(client, "j5", gated=True, secret=SECRET)
    gw.publish([collect.start(0, 0, True), collect.records(0, 0, ["a", "b"]), collect.commit(0, 2)])
    assert len(fetch_results(client, "j5", 0, secret=SECRET)) == 3
    fetch_results(client, "j5", 3, secret=SECRET)  # acknowledged: the list is empty, acked == 3
    # A new server: the acknowledged count is gone with everything else; a failover's sink writes anew.
    client.delete(redis_keys.collect("j5"), redis_keys.collect_meta("j5"))
    gw.publish([collect.start(1, 2, True), collect.records(1, 2, ["c"])])
    # Known without being told (rebase=False): a JobManager that restarted with Redis has no memory of
    # the old server, and the acknowledged count the first fetch wrote is gone.
    got = fetch_results(client, "j5", 3, secret=SECRET)
    assert [collect.CollectEntry.decode(r, SER).kind for r in got] == [collect.START, collect.RECORDS]
    assert values(fetch_results(client, "j5", 4, secret=SECRET)) == ["c"]  # offsets go on from there
    # Once the job has ended nothing writes its results again: a lost list is an error, not an end.
    client.delete(redis_keys.collect("j5"), redis_keys.collect_meta("j5"))
    with pytest.raises(ResultOffsetError, match="ended and its results from offset 5 on are gone"):
        fetch_results(client, "j5", 5, secret=SECRET, ended=True)


def test_an_entry_pushed_by_someone_with_only_the_redis_url_is_refused_undecoded(client: redis.Redis) -> None:
    import pickle

    gw = RedisCollectGateway(client, "j9", gated=False, secret=SECRET)
    gw.publish([collect.start(0, 0, False)])
    client.rpush(redis_keys.collect("j9"), pickle.dumps(("never", "decoded")))
    with pytest.raises(UnauthenticatedResult, match="j9"):
        fetch_results(client, "j9", 0, secret=SECRET)
    # An entry sealed for another job's list does not open in this one.
    other = RedisCollectGateway(client, "j10", gated=False, secret=SECRET)
    other.publish([collect.start(0, 0, False)])
    client.rpush(redis_keys.collect("j11"), client.lindex(redis_keys.collect("j10"), 0))
    with pytest.raises(UnauthenticatedResult):
        fetch_results(client, "j11", 0, secret=SECRET)


def test_a_genuine_entry_pushed_again_is_left_out_but_reading_its_offset_again_is_not(client: redis.Redis) -> None:
    from millstream.engine.runtime.io.redis_collect import CollectPositions, fetch_batch

    key = redis_keys.collect("jr")
    gw = RedisCollectGateway(client, "jr", gated=True, secret=SECRET)
    gw.publish([collect.start(0, 0, True), collect.records(0, 0, ["a", "b"])])
    positions = CollectPositions()
    assert len(fetch_results(client, "jr", 0, secret=SECRET, positions=positions)) == 2
    assert len(fetch_results(client, "jr", 0, secret=SECRET, positions=positions)) == 2  # a retried fetch
    client.rpush(key, client.lindex(key, 0))  # the START copied to the end: it would clear the client's pending
    gw.publish([collect.records(0, 1, ["c"])])
    # The copy (offset 2) is left out, yet counts: the entry after it keeps its offset.
    batch = fetch_batch(client, "jr", 2, secret=SECRET, positions=positions)
    assert values(batch.entries) == ["c"] and batch.next_offset == 4 and positions.copies == 1
    # Even an entry nobody read yet: its copy is left out once the original was read.
    other = RedisCollectGateway(client, "jr2", gated=False, secret=SECRET)
    other.publish([collect.records(0, 0, ["c"])])
    client.rpush(redis_keys.collect("jr2"), client.lindex(redis_keys.collect("jr2"), 0))
    assert values(fetch_results(client, "jr2", 0, secret=SECRET, positions=CollectPositions())) == ["c"]
    # Without positions (nothing remembered) the copy would be handed out: what the numbering is for.
    assert values(fetch_results(client, "jr2", 0, secret=SECRET)) == ["c", "c"]


def test_new_positions_take_in_the_entries_before_the_offset_so_a_copy_across_a_restart_is_left_out(
    client: redis.Redis,
) -> None:
    """A JobManager restarted (its positions are new) and the client goes on from its offset: an
    entry it read before the restart, copied to the end since, is left out; new entries still come,
    and a restored attempt's (a new writer numbered from 0) are no copies."""
    from millstream.engine.runtime.io.redis_collect import CollectPositions

    key = redis_keys.collect("jp")
    gw = RedisCollectGateway(client, "jp", gated=False, secret=SECRET)
    gw.publish([collect.start(0, 0, False), collect.records(0, 0, ["a"]), collect.records(0, 1, ["b"])])
    assert values(fetch_results(client, "jp", 0, secret=SECRET, positions=CollectPositions())) == ["a", "b"]
    client.rpush(key, client.lindex(key, 1))  # records "a", read before the restart, pushed again
    restored = RedisCollectGateway(client, "jp", gated=False, secret=SECRET)
    restored.publish([collect.start(1, 0, False), collect.records(1, 0, ["a"])])
    restarted = CollectPositions()
    assert values(fetch_results(client, "jp", 3, secret=SECRET, positions=restarted)) == ["a"]  # attempt 1's
    assert restarted.copies == 1
    # The same read by new positions that did not take in the entries before the offset: the copy shows.
    client.delete(key, redis_keys.collect_meta("jp"))
    gw = RedisCollectGateway(client, "jp", gated=False, secret=SECRET)
    gw.publish([collect.start(0, 0, False), collect.records(0, 0, ["a"]), collect.records(0, 1, ["b"])])
    fetch_results(client, "jp", 0, secret=SECRET, positions=CollectPositions())
    client.rpush(key, client.lindex(key, 1))
    unprimed = CollectPositions()
    unprimed.primed = True
    assert values(fetch_results(client, "jp", 3, secret=SECRET, positions=unprimed)) == ["a"]  # the copy
    assert unprimed.copies == 0


def test_entries_of_a_list_rebuilt_after_a_redis_restart_are_not_taken_for_replays(client: redis.Redis) -> None:
    from millstream.engine.runtime.io.redis_collect import CollectPositions

    positions = CollectPositions()
    old = RedisCollectGateway(client, "jl", gated=True, secret=SECRET)
    old.publish([collect.start(0, 0, True), collect.records(0, 0, ["a"]), collect.records(0, 1, ["b"])])
    assert len(fetch_results(client, "jl", 0, secret=SECRET, positions=positions)) == 3
    fetch_results(client, "jl", 1, secret=SECRET, positions=positions)  # the client has offset 0 only
    client.delete(redis_keys.collect("jl"), redis_keys.collect_meta("jl"))  # Redis restarted empty
    new = RedisCollectGateway(client, "jl", gated=True, secret=SECRET)  # the failover's attempt
    new.publish([collect.start(1, 0, True), collect.records(1, 0, ["a"])])
    got = fetch_results(client, "jl", 1, secret=SECRET, positions=positions)
    assert [collect.CollectEntry.decode(r, SER).attempt for r in got] == [1, 1]  # at offsets 1 and 2, read before


def test_a_stray_offset_before_any_read_does_not_move_the_list(client: redis.Redis) -> None:
    """Only a list a failover rebuilt (it starts with a restored attempt's START) continues at a
    client's offset; on a list nobody read yet an offset past 0 is refused and changes nothing."""
    assert fetch_results(client, "js", 7, secret=SECRET) == []  # nothing written yet: nothing to read
    gw = RedisCollectGateway(client, "js", gated=False, secret=SECRET)
    gw.publish([collect.start(0, 0, False), collect.records(0, 0, ["a", "b"])])
    with pytest.raises(ResultOffsetError, match="past"):
        fetch_results(client, "js", 7, secret=SECRET)
    assert values(fetch_results(client, "js", 0, secret=SECRET)) == ["a", "b"]  # offsets unmoved
    with pytest.raises(ResultOffsetError, match="past"):
        fetch_results(client, "js", 7, secret=SECRET)


def test_a_copy_of_a_writers_fully_acknowledged_entries_is_left_out_after_a_restart(client: redis.Redis) -> None:
    """Every entry of the writer was read, acknowledged and trimmed before the JobManager restarted, so
    the list holds none of them: the sealed marks in the job's hash still know the writer's highest
    index (before them a copy pushed after the restart was handed to the client a second time)."""
    from millstream.engine.runtime.io.redis_collect import CollectPositions, fetch_batch

    key = redis_keys.collect("jm")
    gw = RedisCollectGateway(client, "jm", gated=False, secret=SECRET)
    gw.publish([collect.start(0, 0, False), collect.records(0, 0, ["a"]), collect.records(0, 1, ["b"])])
    before = CollectPositions()
    assert values(fetch_results(client, "jm", 0, secret=SECRET, positions=before)) == ["a", "b"]
    copied = client.lindex(key, 1)  # records "a", copied by someone with the Redis URL
    assert fetch_results(client, "jm", 3, secret=SECRET, positions=before) == []
    assert client.llen(key) == 0  # all acknowledged and trimmed
    client.rpush(key, copied)  # pushed again after the restart
    gw.publish([collect.records(0, 2, ["c"])])  # the writer goes on: its new entries still come
    restarted = CollectPositions()
    batch = fetch_batch(client, "jm", 3, secret=SECRET, positions=restarted)
    assert values(batch.entries) == ["c"] and batch.next_offset == 5 and restarted.copies == 1
    # The marks were stored before that batch went out: a client that did not get it asks again from
    # 3 after another restart, and gets "c" (known at its position) without the copy.
    again = CollectPositions()
    assert values(fetch_results(client, "jm", 3, secret=SECRET, positions=again)) == ["c"] and again.copies == 1


def test_result_marks_put_back_from_an_older_copy_or_forged_are_refused(client: redis.Redis) -> None:
    """Someone with the Redis URL puts back the marks sealed at an earlier read (which know a lower
    index for the writer), rolling the unsealed acknowledged count back with them: refused, clearly,
    before any entry is handed out; with the genuine marks back the client goes on."""
    from millstream.engine.runtime.io.redis_collect import CollectPositions

    key, meta = redis_keys.collect("jo"), redis_keys.collect_meta("jo")
    gw = RedisCollectGateway(client, "jo", gated=False, secret=SECRET)
    gw.publish([collect.start(0, 0, False), collect.records(0, 0, ["a"]), collect.records(0, 1, ["b"])])
    before = CollectPositions()
    assert values(fetch_results(client, "jo", 0, max_entries=2, secret=SECRET, positions=before)) == ["a"]
    older = client.hget(meta, "marks")  # covers offsets before 2: the writer's entries up to index 1
    assert values(fetch_results(client, "jo", 2, secret=SECRET, positions=before)) == ["b"]
    copied = client.lindex(key, 0)  # records "b", index 2
    fetch_results(client, "jo", 3, secret=SECRET, positions=before)  # all acknowledged and trimmed
    genuine = client.hget(meta, "marks")
    client.rpush(key, copied)
    # The rollback: older marks, and the acknowledged count and list as they were when those were sealed.
    client.hset(meta, mapping={"marks": older, "acked": 2})
    client.lpush(key, b"padding")
    with pytest.raises(UnauthenticatedResult, match="older than that offset"):
        fetch_results(client, "jo", 3, secret=SECRET, positions=CollectPositions())
    assert client.lindex(key, 0) == b"padding"  # refused before trimming anything
    client.hset(meta, mapping={"marks": genuine, "acked": 3})
    client.lpop(key)
    # Forged marks, another job's, and none at all are refused the same way.
    record_ack(client, "other-job", collect.Ack(0, 1), SECRET)
    for forged in (collect.Ack(0, 1).encode(), client.hget(redis_keys.collect_meta("other-job"), "ack"), None):
        if forged is None:
            client.hdel(meta, "marks")
        else:
            client.hset(meta, "marks", forged)
        with pytest.raises(UnauthenticatedResult):
            fetch_results(client, "jo", 3, secret=SECRET, positions=CollectPositions())
    client.hset(meta, "marks", genuine)
    retried = CollectPositions()
    assert fetch_results(client, "jo", 3, secret=SECRET, positions=retried) == [] and retried.copies == 1


def test_positions_keep_the_most_recently_advanced_writers_up_to_the_cap() -> None:
    """In memory alone (no durable record: tests/backend/test_stream_marks.py has the JobManager's)."""
    from millstream.engine.runtime.io.redis_collect import CACHED_WRITERS, CollectPositions

    positions = CollectPositions()
    first, second = b"w0000000", b"w0000001"
    positions.accept(0, first, 0)
    positions.accept(1, second, 0)
    positions.accept(2, first, 1)  # the first writer advanced last: the second is now the stalest
    for n in range(CACHED_WRITERS - 1):
        positions.accept(3 + n, n.to_bytes(8, "big"), 0)
    assert not positions.accept(10**6, first, 1)  # still known: a copy
    assert positions.accept(10**6 + 1, second, 0)  # forgotten at the cap: its copy would be taken
