"""This JobManager's part in high availability: leader or standby, and the Dispatcher for each.

A standby keeps an unstarted Dispatcher that answers reads from SQL (REST mutations are forwarded to
the leader by backend/leader_forwarding.py). When the election (engine/jobmanager/leader_election.py)
grants the lease, a new Dispatcher is built for that term, with Redis writes and SQL writes fenced by
the term's token, and started: it recovers every running job from SQL and its latest checkpoint, as
a restarted JobManager does, and TaskManagers, which address the JobManager only through Redis,
report to it from then on. When the lease is lost the term's Dispatcher is stopped and the standby
one answers again. Without high availability, :class:`SoleJobManager` answers the same questions.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

import redis
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.leader_fence import SqlLeaderFence
from millstream.backend.persistence.sql_job_store import SqlJobStore
from millstream.backend.settings import Settings
from millstream.engine.jobmanager.dispatcher import Dispatcher
from millstream.engine.jobmanager.leader_election import FencedOut, FencedRedis, RedisLeaderElection
from millstream.engine.jobmanager.leader_lease import Lease, LeaseConfig

log = logging.getLogger("millstream.leadership")

def make_leadership(
    holder: Any, settings: Settings, client: redis.Redis, sessions: sessionmaker[Session], dispatcher: Dispatcher
) -> "SoleJobManager | JobManagerLeadership":
    """This JobManager's role. ``dispatcher`` is the one the app built: without high availability it
    simply runs; with it, it is the standby's (its job writes refused by a token-less fence), and each
    term of leadership runs a new Dispatcher configured like it."""
    if not settings.high_availability:
        return SoleJobManager(settings.jobmanager_address, dispatcher)
    sql = dispatcher.store.inner  # under the Dispatcher's write-behind queue
    if isinstance(sql, SqlJobStore):
        sql.fence = SqlLeaderFence(sessions)  # a standby never changes job state

    def like(store: SqlJobStore, writes: Any, leading: Callable[[], bool]) -> Dispatcher:
        term = Dispatcher(
            client, store, dispatcher.config, dispatcher.clock, writes=writes, leadership=leading, epoch=writes.lease.token
        )
        term.state_roots = dispatcher.state_roots
        return term

    return JobManagerLeadership(
        holder, settings.jobmanager_address, client, sessions, dispatcher, like, settings.leader_lease_ms,
        secret=dispatcher.config.cluster_secret,
    )


#: builds a term's Dispatcher from its fenced job store, fenced Redis writes and leadership check
DispatcherFactory = Callable[[SqlJobStore, Any, Callable[[], bool]], Dispatcher]


def lease_config(lease_ms: int) -> LeaseConfig:
    """Renew four times per lease, retry for it eight times per lease: a dead leader is replaced
    about one lease after its last renewal. The margin exceeds the Dispatcher's 0.2 s wait on its
    inbox, so a wait begun while the lease held ends before any successor can exist."""
    return LeaseConfig(
        ttl_ms=lease_ms, renew_interval_ms=max(50, lease_ms // 4), retry_interval_ms=max(50, lease_ms // 8),
        margin_ms=max(250, lease_ms // 10),
    )


class SoleJobManager:
    """No high availability: this JobManager is the leader for as long as it runs."""

    high_availability = False

    def __init__(self, address: str, dispatcher: Dispatcher) -> None:
        self.address = address
        self.dispatcher = dispatcher

    def serving_leader(self) -> bool:
        return True

    def leader_address(self) -> str | None:
        return self.address

    def info(self) -> dict[str, Any]:
        return {"address": self.address, "leaderSince": self.dispatcher.started_ms, "standbys": [], "self": self.address,
                "role": "leader", "fencingToken": None}

    def start(self) -> None:
        self.dispatcher.start()

    def stop(self) -> None:
        self.dispatcher.stop()


class JobManagerLeadership:
    """Leader or standby; swaps ``holder.dispatcher`` (the app's state) as leadership comes and goes."""

    high_availability = True

    def __init__(
        self,
        holder: Any,
        address: str,
        client: redis.Redis,
        sessions: sessionmaker[Session],
        standby: Dispatcher,
        make_dispatcher: DispatcherFactory,
        lease_ms: int,
        *,
        secret: str | None,
    ) -> None:
        self.holder = holder  # app.state: REST handlers read holder.dispatcher on every request
        self.address = address
        self.client = client
        self.sessions = sessions
        self.make_dispatcher = make_dispatcher
        self._lock = threading.Lock()
        self._term = 0  # grows with every grant and revoke: a takeover that was overtaken gives up
        self._leading: Dispatcher | None = None  # the started Dispatcher of the current term
        self._fence: SqlLeaderFence | None = None
        self.standby = standby  # never started: answers reads from SQL while this JobManager does not lead
        holder.dispatcher = standby
        # The lease is sealed with the cluster secret: a standby forwards requests (with their
        # credentials) only to a leader named by a lease that a JobManager of this cluster wrote.
        self.election = RedisLeaderElection(
            client, address, self, SqlLeaderFence(sessions), lease_config(lease_ms), secret=secret or ""
        )
        self._leader_cache: tuple[float, Lease | None] = (0.0, None)

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.election.start()

    def stop(self) -> None:
        with self._lock:
            leading = self._leading
        self.election.stop()  # gives the lease back (revoke() swaps the standby Dispatcher in)
        if leading is not None:
            leading.stop()  # waited for here: the Redis client closes right after

    # -- LeadershipListener (called on the election thread) ---------------------------------------
    def grant(self, lease: Lease) -> None:
        with self._lock:
            self._term += 1
            term = self._term
        threading.Thread(target=self._take_over, args=(lease, term), name="takeover", daemon=True).start()

    def revoke(self, lease: Lease, reason: str) -> None:
        with self._lock:
            self._term += 1
            leading, self._leading = self._leading, None
            if self._fence is not None:
                self._fence.release()
                self._fence = None
            self.holder.dispatcher = self.standby
        log.warning("lost the leadership (token %d): %s; now a standby", lease.token, reason)
        if leading is not None:
            threading.Thread(target=leading.stop, name="step-down", daemon=True).start()

    def _take_over(self, lease: Lease, term: int) -> None:
        started = time.monotonic()
        fence = SqlLeaderFence(self.sessions, lease.token)
        with self._lock:
            if term != self._term:
                return
            self._fence = fence

        def leading() -> bool:
            current = self.election.lease
            return current is not None and current.token == lease.token

        dispatcher = self.make_dispatcher(SqlJobStore(self.sessions, fence), FencedRedis(self.client, lease), leading)
        try:
            dispatcher.start()  # recovers the running jobs from SQL and their latest checkpoints
        except Exception as e:
            log.exception("taking over as leader (token %d) failed", lease.token)
            dispatcher.stop()
            # Holding a lease without leading would keep every standby out: give it back.
            self.election.resign(f"taking over failed: {e}")
            return
        with self._lock:
            if term != self._term:
                overtaken = True
            else:
                overtaken = False
                self._leading = dispatcher
                self.holder.dispatcher = dispatcher
        if overtaken:
            dispatcher.stop()
            return
        log.info(
            "leader (token %d) after %.2f s of recovery: %d job(s) in memory",
            lease.token, time.monotonic() - started, len(dispatcher.jobs),
        )

    # -- the fence for the other shared stores (audit log, dashboard sessions, programs) -------------
    def check(self, session: Session) -> None:
        """A :class:`WriteFence` over the current term: inside a write's transaction, FencedOut unless
        this JobManager holds the lease and the SQL fence still carries its token. Between terms
        (a standby, or a leader that stepped down) every write is refused."""
        with self._lock:
            fence = self._fence
        if fence is None:
            raise FencedOut("this JobManager is not the leader: it may not change the cluster's state")
        fence.check(session)

    # -- queries --------------------------------------------------------------------------------------
    def serving_leader(self) -> bool:
        """Whether this JobManager leads and its Dispatcher has finished taking over."""
        with self._lock:
            leading = self._leading
        return leading is not None and self.election.holds()

    def leader(self) -> Lease | None:
        """The lease in Redis, read at most every 200 ms (every standby request asks)."""
        at, lease = self._leader_cache
        if time.monotonic() - at > 0.2:
            lease = self.election.current_leader()
            self._leader_cache = (time.monotonic(), lease)
        return lease

    def leader_address(self) -> str | None:
        lease = self.leader()
        return lease.address if lease is not None else None

    def info(self) -> dict[str, Any]:
        lease = self.election.current_leader()
        members = self.election.members()
        return {
            "address": lease.address if lease else None,
            "leaderSince": lease.since_ms if lease else None,
            "standbys": [m for m in members if lease is None or m != lease.address],
            "self": self.address,
            "role": "leader" if self.serving_leader() else ("taking-over" if self.election.holds() else "standby"),
            "fencingToken": lease.token if lease else None,
        }
