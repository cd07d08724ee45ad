"""The leader lease state machine on a fake clock: when a JobManager acquires, renews, and steps down."""
from __future__ import annotations

import pytest

from millstream.engine.jobmanager.leader_lease import Lease, LeaseAction, LeaseConfig, LeaderLease, LeaseRole

CONFIG = LeaseConfig(ttl_ms=4000, renew_interval_ms=1000, retry_interval_ms=500, margin_ms=400)
LEASE = Lease(7, "http://127.0.0.1:8081", 1_700_000_000_000)


def test_a_standby_tries_for_the_lease_at_once_and_then_every_retry_interval() -> None:
    sm = LeaderLease(CONFIG)
    assert sm.next_action(0.0) is LeaseAction.ACQUIRE
    sm.not_acquired(0.0)
    assert sm.next_action(0.49) is LeaseAction.WAIT
    assert sm.next_action(0.5) is LeaseAction.ACQUIRE
    assert not sm.holds(0.5)


def test_validity_counts_from_when_the_request_was_sent_not_answered() -> None:
    sm = LeaderLease(CONFIG)
    sm.acquired(LEASE, sent=10.0)  # answered later, but the store's TTL started no earlier than 10.0
    assert sm.role is LeaseRole.LEADER
    assert sm.holds(13.59)
    assert not sm.holds(13.6)  # 10 + (4000 - 400) ms


def test_the_leader_renews_every_interval_and_keeps_the_lease() -> None:
    sm = LeaderLease(CONFIG)
    sm.acquired(LEASE, sent=0.0)
    assert sm.next_action(0.5) is LeaseAction.WAIT
    assert sm.next_action(1.0) is LeaseAction.RENEW
    sm.renewed(sent=1.0)
    assert sm.holds(4.5)
    assert sm.next_action(1.5) is LeaseAction.WAIT
    assert sm.wake_at(1.5) == pytest.approx(2.0)


def test_a_leader_paused_past_its_lease_steps_down_before_anything_else() -> None:
    sm = LeaderLease(CONFIG)
    sm.acquired(LEASE, sent=0.0)
    # SIGSTOP at 0.5 s, SIGCONT at 20 s: the renewal is long overdue, but stepping down comes first.
    assert sm.next_action(20.0) is LeaseAction.STEP_DOWN
    assert not sm.holds(20.0)
    assert sm.lost(20.0) == LEASE
    assert sm.role is LeaseRole.STANDBY
    assert sm.next_action(20.0) is LeaseAction.WAIT  # then it campaigns again, as a standby
    assert sm.next_action(20.5) is LeaseAction.ACQUIRE


def test_an_unreachable_store_keeps_the_leader_only_while_its_local_validity_lasts() -> None:
    sm = LeaderLease(CONFIG)
    sm.acquired(LEASE, sent=0.0)
    for t in (1.0, 1.5, 2.0, 2.5, 3.0, 3.5):
        assert sm.next_action(t) is LeaseAction.RENEW
        sm.renew_failed(t)
        assert sm.holds(t)
    assert sm.next_action(3.6) is LeaseAction.STEP_DOWN
    assert sm.wake_at(3.55) <= 3.6  # it wakes in time to step down, not at the next retry


def test_a_late_renewal_answer_does_not_bring_leadership_back() -> None:
    sm = LeaderLease(CONFIG)
    sm.acquired(LEASE, sent=0.0)
    sm.lost(5.0)
    sm.renewed(sent=4.9)
    assert not sm.holds(5.0)
    assert sm.role is LeaseRole.STANDBY


def test_a_renewal_never_shortens_the_validity() -> None:
    sm = LeaderLease(CONFIG)
    sm.acquired(LEASE, sent=5.0)
    sm.renewed(sent=4.0)  # an answer to an older request arriving late
    assert sm.holds(8.5)


def test_lease_values_round_trip_and_malformed_ones_are_no_lease() -> None:
    assert Lease.decode(LEASE.encode().encode()) == LEASE
    assert Lease.decode("12|34|http://h:1|x") == Lease(12, "http://h:1|x", 34)
    for bad in (None, b"", "x|1|a", "1|y|a", "1|2|", "garbage"):
        assert Lease.decode(bad) is None


def test_a_lease_config_that_cannot_be_renewed_in_time_is_refused() -> None:
    with pytest.raises(ValueError, match="must exceed"):
        LeaseConfig(ttl_ms=1000, renew_interval_ms=900, margin_ms=200)
    with pytest.raises(ValueError):
        LeaseConfig(ttl_ms=4000, renew_interval_ms=0)


def test_a_jobmanager_joining_a_running_cluster_waits_before_it_campaigns() -> None:
    sm = LeaderLease(CONFIG)
    sm.stand_by_until(4.0)
    assert sm.next_action(3.9) is LeaseAction.WAIT
    assert sm.next_action(4.0) is LeaseAction.ACQUIRE
    sm.acquired(LEASE, sent=4.0)
    sm.stand_by_until(100.0)  # no effect on a leader
    assert sm.next_action(5.0) is LeaseAction.RENEW
