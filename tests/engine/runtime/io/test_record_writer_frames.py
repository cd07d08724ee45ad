"""RecordWriter and FramedInputGate over the real in-memory channels: watermarks ride in frames, in order."""
from __future__ import annotations

import pickle
import threading
from typing import Any

import msgpack
import pytest

from millstream.engine.runtime.io.channel import ChannelId
from millstream.engine.runtime.io.frames import FramedInputGate, is_frame, pack_frame, split_frame
from millstream.engine.runtime.io.local_channels import LocalChannelRegistry
from millstream.engine.runtime.io.record_writer import RecordWriter
from millstream.engine.runtime.io.serialization import BARRIER, RECORDS, STATUS, WATERMARK, MsgpackSerializer
from millstream.engine.runtime.partitioner import create_partitioner
from millstream.engine.runtime.task_metrics import TaskIOMetrics

SER = MsgpackSerializer()


class Wire:
    """One producer subtask writing to ``n`` consumers over real local channels."""

    def __init__(self, n: int = 1, buffer_records: int = 4, timeout_ms: int = 10, credits: int = 8) -> None:
        self.reg = LocalChannelRegistry(credits)
        cancelled = threading.Event()
        factory = self.reg.factory(cancelled)
        self.cids = [ChannelId("job", 1, 0, dst, 0) for dst in range(n)]
        self.metrics = TaskIOMetrics()
        strategy = "FORWARD" if n == 1 else "BROADCAST"
        self.writer = RecordWriter(
            create_partitioner(strategy, n), [factory.writer(c) for c in self.cids], SER, self.metrics, buffer_records, timeout_ms
        )
        self.gates = [factory.gate([c]) for c in self.cids]

    def elements(self, ch: int = 0) -> list[bytes]:
        return list(self.reg.channels[self.cids[ch]].buffers)

    def credits(self, ch: int = 0) -> int:
        return self.reg.channels[self.cids[ch]].credits

    def drain(self, ch: int = 0, ack: bool = True) -> list[tuple[int, Any, Any]]:
        """What the consuming task sees, acking records buffers as StreamTask does."""
        gate = self.gates[ch]
        seen = []
        while (item := gate.poll(0.0)) is not None:
            kind, a, b = SER.decode(item[1])
            seen.append((kind, list(a) if kind == RECORDS else a, list(b) if kind == RECORDS and b else b))
            if kind == RECORDS and ack:
                gate.ack(item[0])
        return seen


def test_a_watermark_between_batches_travels_in_the_same_element_as_the_records_around_it():
    w = Wire(buffer_records=4)
    w.writer.emit([1, 2], [10, 20])
    w.writer.emit_watermark(15)
    assert w.elements() == []  # the watermark does not flush the buffer
    w.writer.emit([3, 4], [30, 40])  # 4 records: the buffer is full
    [element] = w.elements()
    assert is_frame(element)
    assert w.credits() == 7  # one credit for the whole frame
    assert w.drain() == [(RECORDS, [1, 2], [10, 20]), (WATERMARK, 15, None), (RECORDS, [3, 4], [30, 40])]
    assert w.credits() == 8  # both records buffers acked: exactly one credit came back
    assert w.metrics.records_out == 4


def test_a_watermark_on_an_empty_channel_waits_for_the_buffer_timeout_and_goes_alone_for_one_credit():
    w = Wire(timeout_ms=10)
    w.writer.emit_watermark(99)
    assert w.writer.flush_due(0.0) > 0 and w.elements() == []
    w.writer.flush_due(float("inf"))
    assert w.elements() == [pack_frame([SER.encode(WATERMARK, 99)], 0)]  # a frame with no records part
    assert w.credits() == 7  # every element counts against the channel's bound (issue 13 item 9)
    assert w.drain() == [(WATERMARK, 99, None)]
    assert w.credits() == 8  # the gate returned it: the task acknowledges records buffers only


def test_watermarks_with_no_record_between_them_collapse_to_the_newest():
    w = Wire()
    w.writer.emit([1], [5])
    w.writer.emit_watermark(4)
    w.writer.emit_watermark(6)
    w.writer.emit_watermark(9)
    w.writer.flush_all()
    assert w.drain() == [(RECORDS, [1], [5]), (WATERMARK, 9, None)]


def test_a_barrier_flushes_the_pending_frame_first_and_travels_alone():
    w = Wire()
    w.writer.emit([1], [5])
    w.writer.emit_watermark(5)
    w.writer.emit([2], [6])
    w.writer.broadcast_event(BARRIER, (7, 0, None, "CHECKPOINT", False))
    frame, barrier = w.elements()
    assert split_frame(frame)[0] == 2 and split_frame(barrier) == (0, [SER.encode(BARRIER, (7, 0, None, "CHECKPOINT", False))])
    kinds = [k for k, _, _ in w.drain()]
    assert kinds == [RECORDS, WATERMARK, RECORDS, BARRIER]


def test_idleness_also_flushes_records_and_watermarks_ahead_of_it():
    w = Wire()
    w.writer.emit([1], [5])
    w.writer.emit_watermark(5)
    w.writer.emit_status(True)
    assert [k for k, _, _ in w.drain()] == [RECORDS, WATERMARK, STATUS]


def test_every_channel_gets_the_watermark_after_its_own_records():
    w = Wire(n=2, buffer_records=100)
    w.writer.emit(["a"], [1])
    w.writer.emit_watermark(1)
    w.writer.flush_all()
    for ch in (0, 1):
        assert w.drain(ch) == [(RECORDS, ["a"], [1]), (WATERMARK, 1, None)]


def test_the_parts_of_a_blocked_channels_frame_wait_until_it_is_unblocked():
    w = Wire(buffer_records=100)
    w.writer.emit([1], [1])
    w.writer.emit_watermark(1)
    w.writer.emit([2], [2])
    w.writer.flush_all()
    gate = w.gates[0]
    ch, first = gate.poll(0.0)
    assert SER.decode(first)[0] == RECORDS
    gate.block(ch)
    assert gate.poll(0.0) is None
    gate.unblock(ch)
    assert SER.decode(gate.poll(0.0)[1])[0] == WATERMARK


def test_a_full_frame_spends_credit_so_backpressure_still_bounds_the_channel():
    w = Wire(buffer_records=2, credits=2)
    for i in range(2):
        w.writer.emit([i], [i])
        w.writer.emit_watermark(i)
        w.writer.emit([i], [i])
    assert len(w.elements()) == 2 and w.credits() == 0
    # No ack yet: the consumer read both frames but holds the credit until it processed them.
    w.drain(ack=False)
    assert w.credits() == 0


def test_frames_round_trip_and_are_never_mistaken_for_a_plain_buffer():
    parts = [SER.encode(RECORDS, [1, "x"], [3, 4]), SER.encode(WATERMARK, 2**63 - 1), b""]
    assert split_frame(pack_frame(parts, 1)) == (1, parts)
    for plain in (SER.encode(RECORDS, [], None), SER.encode(WATERMARK, 5), pickle.dumps((0, [1], None), protocol=5)):
        assert not is_frame(plain)
    frame = pack_frame(parts[:2], 1)
    for cut in (len(frame) - 3, len(frame) - len(parts[1]) - 2):  # inside a part; inside a length
        with pytest.raises(ValueError, match="truncated"):
            split_frame(frame[:cut])
    # 0xC1 is the one byte msgpack never uses, so no msgpack buffer can start with it.
    with pytest.raises(ValueError):
        msgpack.unpackb(bytes([0xC1]))


def test_frames_through_a_gate_that_has_other_channels_too():
    reg = LocalChannelRegistry(8)
    cids = [ChannelId("job", 1, src, 0, 0) for src in range(2)]
    factory = reg.factory(threading.Event())
    metrics = TaskIOMetrics()
    writers = [RecordWriter(create_partitioner("FORWARD", 1), [factory.writer(c)], SER, metrics, 10, 10) for c in cids]
    gate = factory.gate(cids)
    assert isinstance(gate, FramedInputGate)
    for src, rw in enumerate(writers):
        rw.emit([src], [src])
        rw.emit_watermark(src)
        rw.emit([src + 10], [src])
        rw.flush_all()
    per_channel: dict[int, list[int]] = {0: [], 1: []}
    while (item := gate.poll(0.0)) is not None:
        kind, a, _ = SER.decode(item[1])
        per_channel[item[0]].append(kind)
        if kind == RECORDS:
            gate.ack(item[0])
    assert per_channel == {0: [RECORDS, WATERMARK, RECORDS], 1: [RECORDS, WATERMARK, RECORDS]}
    assert all(reg.channels[c].credits == 8 for c in cids)


def test_watermarks_and_idleness_alone_are_bounded_by_credit_too():
    """Issue 13 item 9: frames of only watermarks or status bypassed credits, so a source emitting them
    to a consumer that reads nothing grew the channel without bound."""
    w = Wire(credits=3, timeout_ms=0)
    done = threading.Event()

    def produce() -> None:
        try:
            for i in range(50):
                w.writer.emit_watermark(i)
                w.writer.flush_all()
                w.writer.emit_status(i % 2 == 0)
        finally:
            done.set()

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    w.reg.cond.acquire()
    try:
        # Wait on progress, not a sleep: until the producer is blocked for credit.
        assert w.reg.cond.wait_for(lambda: w.writer.writers[0].blocked_since is not None, timeout=10)
    finally:
        w.reg.cond.release()
    assert len(w.elements()) == 3 and w.credits() == 0 and not done.is_set()
    seen: list[int] = []
    while not done.is_set() or w.elements():
        seen += [k for k, _, _ in w.drain()]  # the consumer takes them: the gate returns their credits
    t.join(10)
    assert seen.count(WATERMARK) == 50 and seen.count(STATUS) == 50
    assert w.credits() == 3


def test_bytes_out_of_a_writer_are_the_bytes_in_of_its_readers():
    """numBytesOut of one end of an edge and numBytesIn of the other agree: frames with watermarks
    and events (barriers, status) count on both sides, not records alone on one."""
    w = Wire(n=2, buffer_records=3)
    for i in range(10):
        w.writer.emit([i], [i * 10])
        w.writer.emit_watermark(i * 10)
    w.writer.emit_status(True)
    w.writer.broadcast_event(BARRIER, [1, 0, "", "CHECKPOINT"])
    w.writer.flush_all()
    for ch in range(2):
        w.drain(ch)
    received = sum(g.bytes_received for g in w.gates)
    assert received == w.metrics.bytes_out > 0
