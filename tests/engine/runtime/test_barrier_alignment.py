"""BarrierAligner: exactly-once alignment blocks inputs until barrier n arrived on all; at-least-once only
counts. One alignment at a time, owned by the barrier that started it (Flink's SingleCheckpointBarrierHandler)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from millstream.engine.runtime.checkpointing import AlignmentStep, Barrier, BarrierAligner


def b(cid: int, kind: str = "CHECKPOINT") -> Barrier:
    return Barrier(cid, 1000 + cid, f"/tmp/chk-{cid}", kind)


def test_exactly_once_blocks_each_input_until_all_have_the_barrier():
    a = BarrierAligner(exactly_once=True)
    open_ = {0, 1, 2}
    assert a.on_barrier(0, b(1), open_, 0.0) == AlignmentStep(block=(0,))
    assert a.on_barrier(2, b(1), open_, 0.1) == AlignmentStep(block=(2,))
    step = a.on_barrier(1, b(1), open_, 0.2)
    assert step.block == () and step.unblock == (0, 1, 2)
    assert step.ready == b(1) and step.started == 0.0
    assert a.current is None and a.done == 1


def test_at_least_once_never_blocks():
    a = BarrierAligner(exactly_once=False)
    assert a.on_barrier(0, b(1), {0, 1}, 0.0) == AlignmentStep()
    step = a.on_barrier(1, b(1), {0, 1}, 0.0)
    assert step.ready == b(1) and step.block == () and step.unblock == ()


def test_single_input_snapshots_at_once():
    a = BarrierAligner(exactly_once=True)
    step = a.on_barrier(0, b(5), {0}, 0.0)
    assert step.ready == b(5) and step.unblock == (0,)


def test_an_ended_input_completes_the_alignment_with_the_barrier_that_started_it():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, b(1), {0, 1}, 0.0)
    step = a.on_end_of_partition({0})
    assert step.ready == b(1) and step.unblock == (0,)
    assert a.on_end_of_partition(set()) == AlignmentStep()  # nothing aligning any more


def test_end_of_partition_without_an_alignment_does_nothing():
    a = BarrierAligner(exactly_once=True)
    assert a.on_end_of_partition({1}) == AlignmentStep()


def test_a_late_older_barrier_never_completes_a_newer_alignment():
    """The bug of issue 13 item 3: barrier 4 on the second input reported checkpoint 5 ready."""
    a = BarrierAligner(exactly_once=True)
    assert a.on_barrier(0, b(5), {0, 1}, 0.0) == AlignmentStep(block=(0,))
    assert a.on_barrier(1, b(4), {0, 1}, 0.1) == AlignmentStep()  # dropped
    assert a.current == 5 and a.arrived == {0}
    step = a.on_barrier(1, b(5), {0, 1}, 0.2)
    assert step.ready == b(5)


def test_the_ready_barrier_is_the_aligners_even_when_an_input_ends_after_a_late_barrier():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, b(5), {0, 1}, 0.0)
    a.on_barrier(1, b(4), {0, 1}, 0.1)
    step = a.on_end_of_partition({0})
    assert step.ready == b(5)


def test_a_newer_barrier_abandons_the_older_alignment():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, b(1), {0, 1, 2}, 0.0)
    step = a.on_barrier(1, b(2), {0, 1, 2}, 0.1)
    assert step == AlignmentStep(block=(1,), unblock=(0,), abandoned=1)
    assert a.current == 2 and a.done == 1
    assert a.on_barrier(0, b(1), {0, 1, 2}, 0.2) == AlignmentStep()  # the abandoned one's late barrier
    a.on_barrier(0, b(2), {0, 1, 2}, 0.3)
    step = a.on_barrier(2, b(2), {0, 1, 2}, 0.4)
    assert step.ready == b(2) and step.started == 0.1 and step.unblock == (0, 1, 2)


def test_a_newer_barrier_that_completes_at_once_still_reports_the_abandoned_one():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, b(1), {0, 1}, 0.0)
    step = a.on_barrier(1, b(2), {1}, 0.1)  # input 0 ended meanwhile; input 1 is the only one open
    assert step.abandoned == 1 and step.ready == b(2) and step.unblock == (0, 1)


def test_late_barriers_of_a_taken_checkpoint_are_ignored():
    a = BarrierAligner(exactly_once=True)
    assert a.on_barrier(0, b(3), {0}, 0.0).ready == b(3)
    assert a.on_barrier(0, b(3), {0}, 0.1) == AlignmentStep()
    assert a.on_barrier(0, b(2), {0}, 0.1) == AlignmentStep()


def test_abort_of_the_aligning_checkpoint_unblocks_and_drops_its_later_barriers():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, b(3), {0, 1}, 0.0)
    assert a.abort(3) == [0]
    assert a.current is None
    assert a.on_barrier(1, b(3), {0, 1}, 0.1) == AlignmentStep()


def test_abort_of_a_checkpoint_whose_barriers_have_not_come_yet():
    a = BarrierAligner(exactly_once=True)
    assert a.abort(4) == []
    assert a.on_barrier(0, b(4), {0, 1}, 0.0) == AlignmentStep()  # aborted: never aligned
    assert a.on_barrier(0, b(5), {0, 1}, 0.1) == AlignmentStep(block=(0,))


def test_abort_of_another_checkpoint_leaves_the_alignment_alone():
    a = BarrierAligner(exactly_once=True)
    a.on_barrier(0, b(5), {0, 1}, 0.0)
    assert a.abort(2) == []
    assert a.abort(7) == []
    assert a.on_barrier(1, b(5), {0, 1}, 0.1).ready == b(5)
    assert a.on_barrier(0, b(7), {0, 1}, 0.2) == AlignmentStep()  # 7 was aborted before it came
    assert a.on_barrier(0, b(8), {0, 1}, 0.3) == AlignmentStep(block=(0,))


def test_barrier_wire_round_trip():
    x = Barrier(7, 1234, "/tmp/x/chk-7", "CHECKPOINT")
    assert Barrier.from_wire(x.to_wire()) == x


# -- properties over arbitrary arrival orders ------------------------------------------------------

events = st.lists(
    st.one_of(
        st.tuples(st.just("barrier"), st.integers(0, 2), st.integers(1, 6)),
        st.tuples(st.just("eop"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("abort"), st.just(0), st.integers(1, 6)),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(events, st.booleans())
def test_properties_of_any_arrival_order(evs, exactly_once):
    """Whatever the order: snapshots are taken in increasing id order, each with a barrier of its own
    id that arrived on every input still open (or that ended), never for an aborted id; a blocked
    channel is always one whose barrier of the current alignment arrived."""
    a = BarrierAligner(exactly_once)
    open_ = {0, 1, 2}
    blocked: set[int] = set()
    seen: dict[int, set[int]] = {}  # checkpoint id -> inputs its barrier arrived on
    aborted: set[int] = set()
    taken: list[int] = []
    for kind, ch, cid in evs:
        if kind == "abort":
            aborted.add(cid)
            blocked -= set(a.abort(cid))
            continue
        if ch not in open_:
            continue
        if kind == "eop":
            open_.discard(ch)
            blocked.discard(ch)
            step = a.on_end_of_partition(open_)
        else:
            if ch in blocked:
                continue  # a blocked channel delivers nothing
            seen.setdefault(cid, set()).add(ch)
            step = a.on_barrier(ch, b(cid), open_, float(len(taken)))
        blocked |= set(step.block)
        blocked -= set(step.unblock)
        if not exactly_once:
            assert not blocked
        if step.ready is not None:
            r = step.ready.checkpoint_id
            assert r not in aborted
            assert not taken or r > taken[-1]
            assert open_ <= seen[r]
            taken.append(r)
        if step.abandoned is not None:
            assert step.ready is None or step.abandoned < step.ready.checkpoint_id
        if a.current is not None:
            assert blocked <= a.arrived
        else:
            assert not blocked
