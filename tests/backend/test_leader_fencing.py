"""The leader lease against a real Redis and a real job database (SQLite, and PostgreSQL when one is
reachable): only the holder renews, tokens grow, and a JobManager that lost the lease can change
nothing, neither in Redis nor in SQL."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence import database
from millstream.backend.persistence.database import make_engine, make_session_factory, upgrade_database
from millstream.backend.persistence.leader_fence import SqlLeaderFence
from millstream.backend.persistence.models import JobRow
from millstream.backend.persistence.sql_job_store import SqlJobStore
from millstream.engine import redis_keys
from millstream.engine.jobmanager.job_store import JobRecord
from millstream.engine.jobmanager.leader_election import FencedOut, FencedRedis, RedisLeaderElection, seal_lease
from millstream.engine.jobmanager.leader_lease import Lease, LeaseConfig
from tests.engine.progress import until

# Steps driven by hand: a lease long enough that a loaded machine never lets it run out mid-test.
SLOW = LeaseConfig(ttl_ms=10_000, renew_interval_ms=1000, retry_interval_ms=200, margin_ms=500)
# The election threads on their own: a short lease, so a takeover happens within the test.
FAST = LeaseConfig(ttl_ms=1500, renew_interval_ms=300, retry_interval_ms=100, margin_ms=150)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.changed = threading.Event()

    def grant(self, lease: Lease) -> None:
        self.events.append(("grant", lease.token))
        self.changed.set()

    def revoke(self, lease: Lease, reason: str) -> None:
        self.events.append(("revoke", lease.token))
        self.changed.set()


@pytest.fixture
def client(redis_url: str):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    upgrade_database(database_url)
    engine = make_engine(database_url)
    yield make_session_factory(engine)
    engine.dispose()


SECRET = "fencing-test-secret"


def _election(client, sessions, address: str, recorder: Recorder, config: LeaseConfig = SLOW) -> RedisLeaderElection:
    return RedisLeaderElection(client, address, recorder, SqlLeaderFence(sessions), config, secret=SECRET)


def _job(state: str = "RUNNING") -> JobRecord:
    return JobRecord(jid="a" * 32, name="j", state=state, job_type="STREAMING", start_time=1, user_code=b"code")


def test_one_jobmanager_wins_and_each_term_gets_a_larger_token(client, sessions) -> None:
    a, b = Recorder(), Recorder()
    ea, eb = _election(client, sessions, "http://a:1", a), _election(client, sessions, "http://b:2", b)
    ea._do_acquire()
    eb._do_acquire()
    assert ea.holds() and not eb.holds()
    first = ea.lease
    assert a.events == [("grant", first.token)] and b.events == []
    assert ea.current_leader() == first
    assert SqlLeaderFence(sessions).highest_token() == first.token
    ea.stop()  # a leader shutting down gives the lease back at once
    assert a.events[-1] == ("revoke", first.token)
    eb._do_acquire()
    assert eb.holds() and eb.lease.token > first.token
    assert eb.current_leader().address == "http://b:2"


def test_only_the_holder_can_renew(client, sessions) -> None:
    a, b = Recorder(), Recorder()
    ea, eb = _election(client, sessions, "http://a:1", a), _election(client, sessions, "http://b:2", b)
    ea._do_acquire()
    # B, pretending to hold A's term with another value, cannot extend it.
    forged = Lease(ea.lease.token, "http://b:2", ea.lease.since_ms)
    assert eb._renew(keys=[redis_keys.JOBMANAGER_LEADER], args=[forged.encode(), 60_000]) == 0
    assert 0 < client.pttl(redis_keys.JOBMANAGER_LEADER) <= SLOW.ttl_ms
    ea._do_renew()
    assert ea.holds()


def test_a_jobmanager_that_lost_the_lease_cannot_write_to_redis_or_sql(client, sessions) -> None:
    a, b = Recorder(), Recorder()
    ea, eb = _election(client, sessions, "http://a:1", a), _election(client, sessions, "http://b:2", b)
    ea._do_acquire()
    old = ea.lease
    old_writes = FencedRedis(client, old)
    old_store = SqlJobStore(sessions, SqlLeaderFence(sessions, old.token))
    old_writes.rpush("ms:tm:x:slot:0:inbox", b"deploy-1")
    old_store.save_job(_job("RUNNING"))
    # A pauses past its lease (the key expires in Redis); B takes over.
    client.delete(redis_keys.JOBMANAGER_LEADER)
    eb._do_acquire()
    new = eb.lease
    assert new.token > old.token
    new_store = SqlJobStore(sessions, SqlLeaderFence(sessions, new.token))

    # A wakes up and tries to deploy, cancel, upload code and change the job's state: all refused.
    with pytest.raises(FencedOut):
        old_writes.rpush("ms:tm:x:slot:0:inbox", b"deploy-2")
    with pytest.raises(FencedOut):
        old_writes.set(redis_keys.job_user_code("a" * 32), b"other code")
    with pytest.raises(FencedOut):
        old_writes.delete("ms:tm:x:slot:0:inbox")
    with pytest.raises(FencedOut):
        old_store.save_job(_job("CANCELED"))
    # ... nor take the reports meant for B from the JobManager inbox
    client.rpush(redis_keys.JOBMANAGER_INBOX, b"ack-1", b"ack-2")
    with pytest.raises(FencedOut):
        old_writes.lpop(redis_keys.JOBMANAGER_INBOX, 500)
    assert client.lrange(redis_keys.JOBMANAGER_INBOX, 0, -1) == [b"ack-1", b"ack-2"]
    assert FencedRedis(client, new).lpop(redis_keys.JOBMANAGER_INBOX, 500) == [b"ack-1", b"ack-2"]
    assert FencedRedis(client, new).lpop(redis_keys.JOBMANAGER_INBOX, 500) is None
    assert client.lrange("ms:tm:x:slot:0:inbox", 0, -1) == [b"deploy-1"]
    assert client.get(redis_keys.job_user_code("a" * 32)) is None
    assert new_store.get_job("a" * 32).state == "RUNNING"
    # The new leader writes freely, and A's renewal makes it step down.
    FencedRedis(client, new).rpush("ms:tm:x:slot:0:inbox", b"deploy-3")
    new_store.save_job(_job("FINISHED"))
    assert new_store.get_job("a" * 32).state == "FINISHED"
    ea._do_renew()
    assert not ea.holds() and a.events[-1] == ("revoke", old.token)


def test_a_standby_never_writes_job_state() -> None:
    fence = SqlLeaderFence(sessionmaker(), token=None)
    with pytest.raises(FencedOut, match="not the leader"):
        fence.check(None)  # type: ignore[arg-type] - refused before the database is touched


def test_a_claim_below_the_database_fence_is_refused(sessions) -> None:
    fence = SqlLeaderFence(sessions)
    assert fence.claim(Lease(5, "http://a:1", 1))
    assert not fence.claim(Lease(5, "http://b:2", 2))
    assert not fence.claim(Lease(3, "http://b:2", 2))
    assert fence.claim(Lease(6, "http://b:2", 3))
    assert fence.highest_token() == 6


def test_tokens_stay_above_the_database_fence_after_redis_lost_its_counter(client, sessions) -> None:
    SqlLeaderFence(sessions).claim(Lease(41, "http://old:1", 1))  # a past term, before Redis was replaced
    a = Recorder()
    ea = _election(client, sessions, "http://a:1", a)
    ea._do_acquire()
    assert ea.lease.token == 42
    assert int(client.get(redis_keys.JOBMANAGER_LEADER_EPOCH)) == 42


def test_a_standby_takes_over_within_a_lease_when_the_leader_stops_renewing(client, sessions) -> None:
    a, b = Recorder(), Recorder()
    ea, eb = _election(client, sessions, "http://a:1", a, FAST), _election(client, sessions, "http://b:2", b, FAST)
    ea.start()
    assert a.changed.wait(5)
    eb.start()
    try:
        # B tries for the lease and is refused while A renews it for longer than a lease lasts (a
        # lease A did not renew would have run out): B never leads meanwhile.
        renewed = ea.renewals
        until(lambda: eb.refused_attempts >= 3, "the standby to try for the lease", timeout=15)
        until(lambda: ea.renewals >= renewed + FAST.ttl_ms // FAST.renew_interval_ms + 1, "a lease's worth of renewals", timeout=15)
        assert b.events == [] and ea.holds() and eb.refused_attempts >= 3
        assert eb.members() == ["http://a:1", "http://b:2"]
        # A stops renewing without giving the lease back (as if killed).
        ea._stop.set()
        ea._thread.join(5)
        stopped = time.monotonic()
        assert b.changed.wait(5)
        took = time.monotonic() - stopped
        assert b.events[0][0] == "grant" and took < 2 * FAST.ttl_ms / 1000
        assert eb.current_leader().address == "http://b:2"
    finally:
        eb.stop()


def test_a_leader_that_resigns_lets_a_standby_in_at_once(client, sessions) -> None:
    a, b = Recorder(), Recorder()
    ea, eb = _election(client, sessions, "http://a:1", a), _election(client, sessions, "http://b:2", b)
    ea._do_acquire()
    token = ea.lease.token
    ea.resign("taking over failed")
    assert not ea.holds() and a.events == [("grant", token), ("revoke", token)]
    assert client.get(redis_keys.JOBMANAGER_LEADER) is None
    eb._do_acquire()
    assert eb.holds() and eb.lease.token == token + 1


def test_a_jobmanager_joining_while_others_stand_by_lets_them_lead_first(client, sessions) -> None:
    a, b = Recorder(), Recorder()
    ea = _election(client, sessions, "http://a:1", a, FAST)
    ea.start()  # alone: campaigns at once
    try:
        assert a.changed.wait(2)
        eb = _election(client, sessions, "http://b:2", b, FAST)
        eb.start()  # A is a member: B waits a lease before it first tries
        try:
            assert eb.state.next_attempt - time.monotonic() > FAST.ttl_ms / 1000 / 2
        finally:
            eb.stop()
    finally:
        ea.stop()


def test_a_successor_claim_waits_for_a_fenced_write_in_flight_and_then_fences_it_out(sessions) -> None:
    """The check and the write share one transaction, which holds the fence row (PostgreSQL: a row
    lock; SQLite: the database's write lock): a new leader's claim cannot slip between an old leader's
    check and its commit. It waits for that write to end, and the old leader's next write is refused."""
    old_store = SqlJobStore(sessions, SqlLeaderFence(sessions))
    assert old_store.fence.claim(Lease(7, "http://a:1", 1))
    postgres = sessions.kw["bind"].dialect.name == "postgresql"
    successor = SqlLeaderFence(sessions)
    claimed = threading.Event()
    checked = threading.Event()
    finish = threading.Event()

    writer_pid: list[int] = []  # PostgreSQL: the old leader's backend, which the claim must wait behind

    def old_leader_writes() -> None:
        with old_store._write() as session:  # the fence check passes: token 7 still holds
            if postgres:
                writer_pid.append(session.scalar(text("SELECT pg_backend_pid()")))
            checked.set()
            finish.wait(10)
            session.add_all([])  # the write itself; commits when the block ends

    def new_leader_claims() -> None:
        successor.claim(Lease(8, "http://b:2", 2))
        claimed.set()

    writer = threading.Thread(target=old_leader_writes)
    writer.start()
    assert checked.wait(10)
    claimer = threading.Thread(target=new_leader_claims)
    claimer.start()
    # Not a pause and a hope: the claim is seen waiting on the old leader's lock (see _claim_waits),
    # several times over, and only then found not done.
    until(
        lambda: claimed.is_set() or _claim_waits(claimer, sessions, writer_pid),
        "the successor's claim to wait on the lock", timeout=15,
    )
    assert not claimed.is_set(), "the successor's claim went through while a fenced write was open"
    finish.set()
    writer.join(10)
    assert claimed.wait(30) and successor.token == 8
    claimer.join(10)
    with pytest.raises(FencedOut, match="stale"):
        old_store.save_job(_job("CANCELED"))
    assert SqlLeaderFence(sessions).highest_token() == 8


def _claim_waits(claimer: threading.Thread, sessions: sessionmaker[Session], writer_pid: list[int]) -> bool:
    """Whether the claiming thread is blocked on the old leader's lock, as the database or the OS shows it.

    PostgreSQL: a backend waits on a lock (``wait_event_type = 'Lock'``) that the old leader's
    transaction holds (``pg_blocking_pids``): the claim's UPDATE queues behind the fence row's lock.
    SQLite: the claiming thread sleeps in SQLite's busy handler (the only thing that sleeps in a
    claim; sqlite3's busy timeout retries the write lock with nanosleeps between tries); the
    kernel's wait channel for the thread, sampled three times, says so each time."""
    if writer_pid:
        with sessions() as session:
            return bool(session.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND :writer = ANY(pg_blocking_pids(pid))"
                ),
                {"writer": writer_pid[0]},
            ))
    if not Path(f"/proc/self/task/{threading.get_native_id()}/wchan").exists():
        pytest.skip("no /proc/self/task/*/wchan: cannot see the claim wait on SQLite's lock here")
    wchan = Path(f"/proc/self/task/{claimer.native_id}/wchan")
    for _ in range(3):
        try:
            if "nanosleep" not in wchan.read_text():
                return False
        except FileNotFoundError:  # the claim's thread has ended
            return False
        time.sleep(0.01)
    return True


def test_a_lease_not_sealed_with_the_cluster_secret_names_no_leader(client, sessions) -> None:
    """Someone who can write to Redis but has no cluster secret cannot make a JobManager believe
    another address leads (a standby would forward requests, with their credentials, to it)."""
    b = _election(client, sessions, "http://b:2", Recorder())
    forged = Lease(99, "http://attacker:6666", int(time.time() * 1000))
    for value in (
        forged.encode(),  # the old, plain format
        seal_lease("another cluster's secret", forged).value(),  # the sealed format, without our secret
        seal_lease(SECRET, forged).value().replace("attacker:6666", "attacker:6667"),  # a genuine tag, changed text
    ):
        client.set(redis_keys.JOBMANAGER_LEADER, value, px=60_000)
        assert b.current_leader() is None, value
    # Sealed with the secret, by a JobManager of this cluster: known.
    a = _election(client, sessions, "http://a:1", Recorder())
    client.delete(redis_keys.JOBMANAGER_LEADER)
    a._do_acquire()
    assert a.holds() and b.current_leader() == a.lease and b.current_leader().address == "http://a:1"
    assert client.get(redis_keys.JOBMANAGER_LEADER).decode().startswith("sealed1:")
    # ... and only with this cluster's secret.
    other = RedisLeaderElection(client, "http://c:3", Recorder(), SqlLeaderFence(sessions), SLOW, secret="other")
    assert other.current_leader() is None
    a._do_renew()
    assert a.holds()  # the sealed value still renews (the script compares the whole value)


def test_on_postgresql_a_leader_frozen_inside_a_write_holds_a_takeover_back_only_until_the_server_ends_it(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader frozen (SIGSTOP, a VM pause) between its fence check and its commit holds the fence row's
    lock; PostgreSQL ends its session once it has idled in the transaction past the engine's timeout,
    so the successor's claim goes through, and the frozen write, when it wakes, lands nothing.
    (SQLite has no server to end it: there the takeover waits for the frozen process, see the README.)"""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite cannot end another process's transaction")
    monkeypatch.setattr(database, "IDLE_IN_TRANSACTION_TIMEOUT_MS", 1000)
    upgrade_database(database_url)
    engine = make_engine(database_url)
    sessions = make_session_factory(engine)
    try:
        old_store = SqlJobStore(sessions, SqlLeaderFence(sessions))
        assert old_store.fence.claim(Lease(7, "http://a:1", 1))
        checked, wake = threading.Event(), threading.Event()
        woken: list[BaseException] = []

        def frozen_leader() -> None:
            try:
                with old_store._write() as session:  # the fence check ran: the row is locked
                    checked.set()
                    wake.wait(30)
                    session.add(JobRow(jid="b" * 32, name="late", state="RUNNING", job_type="STREAMING", start_time=1,
                                       job_graph={}, timestamps={}, vertices=[]))
            except BaseException as e:  # noqa: BLE001 - what the woken leader gets is the finding
                woken.append(e)

        thread = threading.Thread(target=frozen_leader)
        thread.start()
        assert checked.wait(10)
        started = time.monotonic()
        assert SqlLeaderFence(sessions).claim(Lease(8, "http://b:2", 2))
        waited = time.monotonic() - started
        assert 0.5 < waited < 15, waited  # it did wait for the frozen transaction, and not for ever
        wake.set()
        thread.join(10)
        assert len(woken) == 1 and "idle-in-transaction timeout" in str(woken[0]), woken
        with sessions() as s:
            assert s.get(JobRow, "b" * 32) is None
        with pytest.raises(FencedOut, match="stale"):
            old_store.save_job(_job("CANCELED"))
        assert SqlLeaderFence(sessions).highest_token() == 8
    finally:
        engine.dispose()
