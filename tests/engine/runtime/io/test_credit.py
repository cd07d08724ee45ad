"""Credit announcements as pure bookkeeping: cumulative numbers and re-announcing quiet channels."""
from __future__ import annotations

from millstream.engine.runtime.io.credit import CreditAnnouncer, CreditLedger


def test_a_cumulative_number_makes_good_the_tokens_deleted_before_it():
    ledger = CreditLedger(8)
    assert ledger.count(0) == 1
    assert ledger.count(3) == 3  # tokens 1 and 2 were deleted: token 3 carries their credit
    assert ledger.counted == 4


def test_a_number_counted_before_grants_nothing_again():
    ledger = CreditLedger(8)
    ledger.count(4)
    assert ledger.count(4) == 0  # a copy, or the consumer announcing again
    assert ledger.count(2) == 0  # an older one put back
    assert ledger.count(5) == 1


def test_only_quiet_unblocked_channels_with_something_taken_are_announced_again_with_their_latest_number():
    a = CreditAnnouncer(3, now=0.0, after_s=0.5, max_s=2.0, check_s=0.1)
    assert [a.acknowledge(0), a.acknowledge(0), a.acknowledge(1)] == [0, 1, 0]
    received = [0, 0, 0]
    assert a.due(0.4, set(), received) == []
    assert a.due(0.6, {1}, received) == [(0, 1)]  # channel 1 is blocked; channel 2 has taken nothing
    assert a.due(0.65, set(), received) == []  # looked at most every check_s
    assert a.due(0.8, set(), received) == [(1, 0)]
    assert a.due(1.2, set(), received) == []  # channel 0's pause doubled to 1 s
    assert a.due(1.6, set(), received) == [(0, 1)]


def test_an_arrival_resets_the_pause_and_a_long_quiet_is_announced_at_most_every_max_pause():
    a = CreditAnnouncer(1, now=0.0, after_s=0.5, max_s=2.0, check_s=0.1)
    a.acknowledge(0)
    times = [t / 10 for t in range(0, 200)]
    announced = [t for t in times if a.due(t, set(), [0])]
    assert announced[:4] == [0.5, 1.5, 3.5, 5.5]  # pauses 0.5, 1, 2, then 2 at most
    assert a.due(20.0, set(), [1]) == []  # an element arrived since the last look: quiet from now
    assert a.due(20.3, set(), [1]) == [] and a.due(20.5, set(), [1]) == [(0, 0)]
