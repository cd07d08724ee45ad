"""The JobManager leader lease as a pure state machine: when to acquire, renew or step down.

Leadership is a lease with a fencing token (Flink's leader election, built on a lease rather than
ZooKeeper). The holder believes it leads only until ``sent + ttl - margin``, counted on its own
monotonic clock from the moment it *sent* the acquire or renew request that succeeded: the store's
copy of the lease runs out no earlier than that, so two JobManagers never both believe they lead.
A process paused past that point (SIGSTOP, a long GC, a partition) sees on waking that the lease is
gone and steps down before it does anything else; the fencing token refuses any write that slips
through regardless. No I/O here: the Redis side lives in ``leader_election.py``.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class LeaseRole(str, enum.Enum):
    STANDBY = "STANDBY"
    LEADER = "LEADER"


class LeaseAction(str, enum.Enum):
    ACQUIRE = "ACQUIRE"  # try to take the lease (standby)
    RENEW = "RENEW"  # extend our lease (leader)
    STEP_DOWN = "STEP_DOWN"  # our lease ran out locally: stop leading before anything else
    WAIT = "WAIT"


@dataclass(frozen=True)
class LeaseConfig:
    ttl_ms: int = 4000  # the lease's time to live in the store
    renew_interval_ms: int = 1000  # the leader renews this often
    retry_interval_ms: int = 500  # a standby tries to take the lease this often
    # Subtracted from the local validity: covers the store's clock running a little fast.
    margin_ms: int = 300

    def __post_init__(self) -> None:
        if self.ttl_ms <= self.margin_ms + self.renew_interval_ms:
            raise ValueError(
                f"lease ttl {self.ttl_ms} ms must exceed the renew interval ({self.renew_interval_ms} ms) "
                f"plus the safety margin ({self.margin_ms} ms), or the leader loses it between renewals"
            )
        if min(self.renew_interval_ms, self.retry_interval_ms) <= 0 or self.margin_ms < 0:
            raise ValueError("lease intervals must be positive and the margin not negative")


@dataclass(frozen=True)
class Lease:
    """One term of leadership: ``token`` grows with every term, so it orders (fences) leaders."""

    token: int
    address: str  # the leader's REST address
    since_ms: int  # wall-clock epoch ms when the term began
    # The exact value in the store (the encoded lease sealed with the cluster secret, see
    # leader_election.py), which renewals and fenced writes compare; not part of the lease's identity.
    stored: str = field(default="", compare=False, repr=False)

    def encode(self) -> str:
        """The lease's fields as text (what the store's value seals)."""
        return f"{self.token}|{self.since_ms}|{self.address}"

    def value(self) -> str:
        """The value the store holds for this lease."""
        return self.stored or self.encode()

    @staticmethod
    def decode(raw: str | bytes | None) -> "Lease | None":
        """The lease stored in ``raw``; None for nothing or anything malformed."""
        if raw is None:
            return None
        text = raw.decode() if isinstance(raw, bytes) else raw
        token, _, rest = text.partition("|")
        since, _, address = rest.partition("|")
        try:
            return Lease(int(token), address, int(since)) if address else None
        except ValueError:
            return None


class LeaderLease:
    """One JobManager's view of the lease. Feed it the outcome of each store call; ask it what to do
    next and whether it may act as the leader now. Times are monotonic seconds."""

    def __init__(self, config: LeaseConfig = LeaseConfig()) -> None:
        self.config = config
        self.role = LeaseRole.STANDBY
        self.lease: Lease | None = None
        self.valid_until = 0.0  # local monotonic time our lease surely still holds until
        self.next_attempt = 0.0  # when to acquire or renew next

    def holds(self, now: float) -> bool:
        """Whether this JobManager may act as the leader at ``now``."""
        return self.role is LeaseRole.LEADER and now < self.valid_until

    def next_action(self, now: float) -> LeaseAction:
        if self.role is LeaseRole.LEADER:
            if now >= self.valid_until:
                return LeaseAction.STEP_DOWN
            return LeaseAction.RENEW if now >= self.next_attempt else LeaseAction.WAIT
        return LeaseAction.ACQUIRE if now >= self.next_attempt else LeaseAction.WAIT

    def wake_at(self, now: float) -> float:
        """When the next action is due (never later than the lease's local end while leading)."""
        if self.role is LeaseRole.LEADER:
            return min(self.next_attempt, self.valid_until)
        return self.next_attempt

    def _valid_from(self, sent: float) -> float:
        return sent + (self.config.ttl_ms - self.config.margin_ms) / 1000

    def stand_by_until(self, when: float) -> None:
        """Do not campaign before ``when``: a JobManager that joins a running cluster (a restarted one)
        lets the standbys that were waiting take over first."""
        if self.role is LeaseRole.STANDBY:
            self.next_attempt = max(self.next_attempt, when)

    # -- outcomes ------------------------------------------------------------------------------
    def acquired(self, lease: Lease, sent: float) -> None:
        """The store granted ``lease`` to the request sent at ``sent``."""
        self.role = LeaseRole.LEADER
        self.lease = lease
        self.valid_until = self._valid_from(sent)
        self.next_attempt = sent + self.config.renew_interval_ms / 1000

    def not_acquired(self, now: float) -> None:
        """Someone else holds it (or the store is unreachable): try again later."""
        self.next_attempt = now + self.config.retry_interval_ms / 1000

    def renewed(self, sent: float) -> None:
        if self.role is not LeaseRole.LEADER:
            return  # a late answer after we stepped down: leadership is not resurrected by it
        self.valid_until = max(self.valid_until, self._valid_from(sent))
        self.next_attempt = sent + self.config.renew_interval_ms / 1000

    def renew_failed(self, now: float) -> None:
        """The store could not be reached: keep leading while the local validity lasts, retry soon."""
        self.next_attempt = now + min(self.config.retry_interval_ms, self.config.renew_interval_ms) / 1000

    def lost(self, now: float) -> Lease | None:
        """The store says the lease is not ours (expired, taken), or it ran out locally: step down.
        Returns the lease given up, if there was one."""
        gone, self.lease = self.lease, None
        self.role = LeaseRole.STANDBY
        self.valid_until = 0.0
        self.next_attempt = now + self.config.retry_interval_ms / 1000
        return gone
