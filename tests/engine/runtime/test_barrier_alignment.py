"""BarrierAligner: exactly-once alignment blocks inputs until barrier n arrived on all; at-least-once only counts."""
from engine.runtime.checkpointing import Barrier, BarrierAligner


def test_exactly_once_blocks_each_input_until_all_have_the_barrier():
    a = BarrierAligner(exactly_once=True)
    open_ = {0, 1, 2}
    assert a.on_barrier(0, 1, open_, 0.0) == ([0], [], False)
    assert a.on_barrier(2, 1, open_, 0.1) == ([2], [], False)
    block, unblock, ready = a.on_barrier(1, 1, open_, 0.2)
    assert (block, ready) == ([], True)
    assert unblock == [0, 1, 2]
    cid, started = a.complete()
    assert cid == 1 and started == 0.0


def test_at_least_once_never_blocks():
    a = BarrierAligner(exactly_once=False)
    assert a.on_barrier(0, 1, {0, 1}, 0.0) == ([], [], False)
    assert a.on_barrier(1, 1, {0, 1}, 0.0) == ([], [], True)


def test_single_input_snapshots_at_once():
    a = BarrierAligner(exactly_once=True)
    assert a.on_barrier(0, 5, {0}, 0.0) == ([], [0], True)


def test_an_ended_input_no_longer_holds_the_alignment():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, 1, {0, 1}, 0.0)
    assert a.on_end_of_partition({0}) is True


def test_a_newer_barrier_abandons_the_older_alignment():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, 1, {0, 1}, 0.0)
    block, unblock, ready = a.on_barrier(1, 2, {0, 1}, 0.1)
    assert unblock == [0] and block == [1] and not ready
    assert a.current == 2


def test_late_barriers_of_a_taken_checkpoint_are_ignored():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, 3, {0}, 0.0)
    a.complete()
    assert a.on_barrier(0, 3, {0}, 0.1) == ([], [], False)
    assert a.on_barrier(0, 2, {0}, 0.1) == ([], [], False)


def test_barrier_wire_round_trip():
    b = Barrier(7, 1234, "/tmp/x/chk-7", "CHECKPOINT")
    assert Barrier.from_wire(b.to_wire()) == b
