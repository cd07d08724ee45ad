"""Leader election among JobManagers over Redis: a lease with a fencing token, and fenced writes.

The lease is ``ms:jm:leader`` (engine/redis_keys.py), set only if absent and with a TTL, holding
``token|since|address`` sealed with the cluster secret (engine/security/mac.py ``seal_text``); the
token is one above both ``ms:jm:leader:epoch`` and the SQL fence, so every term has a larger one than
the last. Only the holder can renew it (a Lua check-and-PEXPIRE).

Why sealed: a standby forwards every REST request, with its ``Authorization`` header and cookies, to
the address the lease names (backend/leader_forwarding.py). Anyone who can write to Redis could
otherwise name their own address and collect the token. :meth:`RedisLeaderElection.current_leader`
refuses a lease not sealed with this cluster's secret: a standby then knows no leader (reads from
SQL, 503 for mutations), as during a takeover. The Lua scripts never see the secret: the candidate
seals the value for the token it will take before asking, and the acquire script refuses unless that
token is still above the epoch, so the sealed value is written in the same step as the lease.

Every write the leader makes that changes what TaskManagers do (deploy, cancel, trigger, user code, channel
release) goes through :class:`FencedRedis`, whose Lua script performs it only while the lease still
holds the leader's own value: a JobManager that lost the lease (paused, partitioned) cannot slip a
deploy in after a successor took over. The SQL side of the fence is a :class:`FenceStore` that the
backend implements with a row checked inside each write's transaction.

The state machine deciding when to acquire, renew or step down is ``leader_lease.LeaderLease``.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Protocol

import redis

from millstream.engine import redis_keys
from millstream.engine.jobmanager.leader_lease import Lease, LeaseAction, LeaseConfig, LeaderLease
from millstream.engine.security.mac import Unauthenticated, open_text, seal_text

log = logging.getLogger("millstream.leader")

# KEYS: lease, epoch. ARGV: the sealed lease value, its token, ttl ms. The token was chosen above the
# epoch and the SQL fence's floor by the caller, who sealed the value for it (Lua has no secret):
# refused when another candidate took that token or a larger one meanwhile.
_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local epoch = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local t = tonumber(ARGV[2])
if t <= epoch then return false end
redis.call('SET', KEYS[2], t)
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[3])
return ARGV[1]
"""
# KEYS: lease. ARGV: our lease value, ttl ms.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS: lease, then the keys the command touches. ARGV: our lease value, the command, its other arguments.
_FENCED = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED the leader lease is not ours') end
local args = {}
for i = 2, #KEYS do args[#args + 1] = KEYS[i] end
for i = 3, #ARGV do args[#args + 1] = ARGV[i] end
return redis.call(ARGV[2], unpack(args))
"""


LEASE_KIND = "leader_lease"


def seal_lease(secret: str | bytes | None, lease: Lease) -> Lease:
    """``lease`` with its stored value sealed with the cluster secret, bound to the lease key."""
    return Lease(lease.token, lease.address, lease.since_ms,
                 stored=seal_text(secret, LEASE_KIND, (redis_keys.JOBMANAGER_LEADER,), lease.encode()))


def open_lease(secret: str | bytes | None, raw: str | bytes | None) -> Lease | None:
    """The lease sealed in ``raw``; None when there is none. Raises Unauthenticated for a value not
    sealed with ``secret`` (written by someone without it) and for a sealed but malformed one."""
    if raw is None:
        return None
    text = open_text(secret, LEASE_KIND, (redis_keys.JOBMANAGER_LEADER,), raw)
    lease = Lease.decode(text)
    if lease is None:
        raise Unauthenticated("the leader lease is sealed but malformed")
    return Lease(lease.token, lease.address, lease.since_ms, stored=raw.decode() if isinstance(raw, bytes) else raw)


class FencedOut(RuntimeError):
    """A write refused because this JobManager no longer holds the leader lease."""


class FenceStore(Protocol):
    """The durable side of the fence (the job database)."""

    def highest_token(self) -> int:
        """The largest fencing token any leader has claimed here (0 when none has)."""

    def claim(self, lease: Lease) -> bool:
        """Raise the fence to ``lease.token``; False if a leader with a larger token claimed it already."""


class LeadershipListener(Protocol):
    def grant(self, lease: Lease) -> None:
        """This JobManager leads from now on (called on the election thread: must not block)."""

    def revoke(self, lease: Lease, reason: str) -> None:
        """This JobManager no longer leads (called on the election thread: must not block)."""


class FencedRedis:
    """The writes a leading JobManager makes to Redis, each performed only while ``lease`` is still
    the lease in Redis (one Lua script: check and write at once). Reads go straight to the client.
    Raises :class:`FencedOut` once the lease is someone else's or gone."""

    def __init__(self, client: redis.Redis, lease: Lease) -> None:
        self._client = client
        self.lease = lease
        self._value = lease.value()  # the sealed value: the script compares it with the lease in Redis
        self._script = client.register_script(_FENCED)

    def _fenced(self, command: str, keys: list[Any], args: list[Any]) -> Any:
        try:
            return self._script(keys=[redis_keys.JOBMANAGER_LEADER, *keys], args=[self._value, command, *args])
        except redis.ResponseError as e:
            if str(e).startswith("FENCED"):
                raise FencedOut(f"refused {command}: lease {self.lease.token} of {self.lease.address} is no longer held") from e
            raise

    def rpush(self, key: str, *values: Any) -> Any:
        return self._fenced("RPUSH", [key], list(values))

    def set(self, key: str, value: Any, ex: int | None = None, px: int | None = None) -> Any:
        args: list[Any] = [value]
        if ex is not None:
            args += ["EX", ex]
        if px is not None:
            args += ["PX", px]
        return self._fenced("SET", [key], args)

    def delete(self, *keys: str) -> Any:
        return self._fenced("DEL", list(keys), [])

    def lpop(self, key: str, count: int | None = None) -> Any:
        """Taking from a list is a write too: a leader woken from a pause past its lease would take
        reports and acknowledgements meant for its successor and drop them as it steps down (a CI run's
        successor then waited for acknowledgements that never came). Its blocking first read (BLPOP)
        cannot run in a script; it is bounded by its timeout, inside the lease's safety margin."""
        return self._fenced("LPOP", [key], [] if count is None else [count])

    def __getattr__(self, name: str) -> Any:
        # Reads (scan_iter, get, hgetall...) and pipelines for short-lived data are not fenced.
        return getattr(self._client, name)


class RedisLeaderElection:
    """Runs the lease for one JobManager on a thread of its own, and tells ``listener`` when this
    JobManager gains or loses leadership. Also keeps this JobManager in the members set, so any
    JobManager can list the standbys."""

    def __init__(
        self,
        client: redis.Redis,
        address: str,
        listener: LeadershipListener,
        fence_store: FenceStore | None = None,
        config: LeaseConfig = LeaseConfig(),
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        *,
        secret: str | bytes,
    ) -> None:
        self.client = client
        self.secret = secret  # the cluster secret: seals this JobManager's lease, opens the others'
        self._refused_lease: str | bytes | None = None  # the last refused value, logged once
        self.address = address
        self.listener = listener
        self.fence_store = fence_store
        self.config = config
        self.monotonic = monotonic
        self.wall = wall
        self.state = LeaderLease(config)
        self._lock = threading.Lock()  # the state machine, between the thread and holds()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._last_member_write = 0.0
        # Progress of the two sides of the lease, for the logs' readers and for tests that must show
        # a standby tried and failed while a leader renewed (rather than that time merely passed).
        self.renewals = 0  # renewals that kept the lease
        self.refused_attempts = 0  # tries for the lease that found another JobManager holding it

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        try:
            others = [m for m in self.members() if m != self.address]
        except redis.RedisError:
            others = []
        if others:
            # Joining a running cluster (e.g. restarted after a crash): the standbys that were there
            # first take over a dead leader; this one campaigns only after a lease has passed.
            with self._lock:
                self.state.stand_by_until(self.monotonic() + self.config.ttl_ms / 1000)
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop campaigning; a leader gives its lease back at once so a standby need not wait it out."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            lease = self.state.lease
            self.state.lost(self.monotonic())
        try:
            if lease is not None:
                self._release(keys=[redis_keys.JOBMANAGER_LEADER], args=[lease.value()])
            self.client.zrem(redis_keys.JOBMANAGER_MEMBERS, self.address)
        except redis.RedisError as e:
            log.warning("could not give the leader lease back: %s", e)
        if lease is not None:
            self.listener.revoke(lease, "the JobManager is shutting down")

    def resign(self, reason: str) -> None:
        """Give the lease up now (e.g. taking over failed), so another JobManager can lead; this one
        campaigns again after the retry interval."""
        with self._lock:
            lease = self.state.lease
        if lease is None:
            return
        try:
            self._release(keys=[redis_keys.JOBMANAGER_LEADER], args=[lease.value()])
        except redis.RedisError as e:
            log.warning("could not give the leader lease back (it expires on its own): %s", e)
        self._step_down(self.monotonic(), reason)

    def holds(self) -> bool:
        """Whether this JobManager may act as the leader right now (checked on the local clock)."""
        with self._lock:
            return self.state.holds(self.monotonic())

    @property
    def lease(self) -> Lease | None:
        with self._lock:
            return self.state.lease if self.state.holds(self.monotonic()) else None

    # -- queries any JobManager answers -------------------------------------------------------------
    def current_leader(self) -> Lease | None:
        """The lease in Redis if it was sealed with this cluster's secret; None when there is none or
        when it was not (never act on, or send anything to, an address a Redis writer chose)."""
        raw = self.client.get(redis_keys.JOBMANAGER_LEADER)
        try:
            return open_lease(self.secret, raw)
        except Unauthenticated as e:
            if raw != self._refused_lease:  # polled every 200 ms by standbys: log each value once
                self._refused_lease = raw
                log.warning("ignoring the leader lease in Redis (%r): %s; no leader is known", raw[:200] if raw else raw, e)
            return None

    def members(self) -> list[str]:
        """JobManagers seen in the last three lease lifetimes, sorted by address."""
        since = int(self.wall() * 1000) - 3 * self.config.ttl_ms
        return sorted(m.decode() for m in self.client.zrangebyscore(redis_keys.JOBMANAGER_MEMBERS, since, "+inf"))

    # -- the loop ------------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except Exception:  # noqa: BLE001 - the election must outlive any one bad round
                log.exception("leader election round failed")
            with self._lock:
                wake = self.state.wake_at(self.monotonic())
            self._stop.wait(max(0.02, min(wake - self.monotonic(), self.config.retry_interval_ms / 1000)))

    def _round(self) -> None:
        now = self.monotonic()
        self._note_member(now)
        with self._lock:
            action = self.state.next_action(now)
        if action is LeaseAction.STEP_DOWN:
            self._step_down(now, "the lease ran out before it could be renewed")
        elif action is LeaseAction.RENEW:
            self._do_renew()
        elif action is LeaseAction.ACQUIRE:
            self._do_acquire()

    def _note_member(self, now: float) -> None:
        if now - self._last_member_write < self.config.renew_interval_ms / 1000:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            wall_ms = int(self.wall() * 1000)
            pipe.zadd(redis_keys.JOBMANAGER_MEMBERS, {self.address: wall_ms})
            pipe.zremrangebyscore(redis_keys.JOBMANAGER_MEMBERS, "-inf", wall_ms - 10 * self.config.ttl_ms)
            pipe.execute()
            self._last_member_write = now
        except redis.RedisError:
            pass  # membership is informational; the lease calls below report the outage

    def _do_acquire(self) -> None:
        sent = self.monotonic()
        try:
            floor = self.fence_store.highest_token() if self.fence_store is not None else 0
            epoch = int(self.client.get(redis_keys.JOBMANAGER_LEADER_EPOCH) or 0)
            candidate = seal_lease(self.secret, Lease(max(epoch, floor) + 1, self.address, int(self.wall() * 1000)))
            raw = self._acquire(
                keys=[redis_keys.JOBMANAGER_LEADER, redis_keys.JOBMANAGER_LEADER_EPOCH],
                args=[candidate.value(), candidate.token, self.config.ttl_ms],
            )
        except (redis.RedisError, OSError, ValueError) as e:
            log.debug("cannot try for the lease: %s", e)
            with self._lock:
                self.state.not_acquired(self.monotonic())
            return
        lease = candidate if raw is not None else None
        if lease is None:
            self.refused_attempts += 1
            with self._lock:
                self.state.not_acquired(self.monotonic())
            return
        # The database learns the new token before this JobManager reads or writes any job: from now
        # on every write of an older leader is refused there too.
        try:
            claimed = self.fence_store.claim(lease) if self.fence_store is not None else True
        except Exception as e:  # noqa: BLE001 - database away: give the lease back, try again later
            log.warning("took the lease but could not raise the database fence: %s", e)
            claimed = False
        if not claimed:
            try:
                self._release(keys=[redis_keys.JOBMANAGER_LEADER], args=[lease.value()])
            except redis.RedisError:
                pass
            with self._lock:
                self.state.not_acquired(self.monotonic())
            return
        with self._lock:
            self.state.acquired(lease, sent)
            holds = self.state.holds(self.monotonic())
        if not holds:  # the claim took longer than the lease: never act on it
            self._step_down(self.monotonic(), "the lease ran out while it was being taken")
            return
        log.info("this JobManager (%s) is the leader, fencing token %d", self.address, lease.token)
        self.listener.grant(lease)

    def _do_renew(self) -> None:
        with self._lock:
            lease = self.state.lease
        if lease is None:
            return
        sent = self.monotonic()
        try:
            ok = self._renew(keys=[redis_keys.JOBMANAGER_LEADER], args=[lease.value(), self.config.ttl_ms])
        except (redis.RedisError, OSError) as e:
            log.warning("could not renew the leader lease: %s", e)
            with self._lock:
                self.state.renew_failed(self.monotonic())
            return
        if ok:
            self.renewals += 1
            with self._lock:
                self.state.renewed(sent)
        else:
            self._step_down(self.monotonic(), "the lease in Redis is no longer ours (it expired or was taken)")

    def _step_down(self, now: float, reason: str) -> None:
        with self._lock:
            lease = self.state.lost(now)
        if lease is not None:
            log.warning("this JobManager (%s) steps down: %s", self.address, reason)
            self.listener.revoke(lease, reason)
