"""Frames: several serialized buffers shipped as one channel element, and the gate that splits them.

Flink writes watermarks into the same network buffers as records instead of
flushing around them. Millstream does the same: a RecordWriter that has a
watermark to send puts it after the records already waiting for that channel,
and the whole run ``records, watermark, records, ...`` travels as one frame,
one Redis round trip, in order. ``FramedInputGate`` hands the parts to the
task one by one, so a task still sees every buffer exactly as it was encoded.

A frame is ``0xC1`` (a byte that never starts a msgpack value or a pickle),
the number of data (records) parts as a little-endian u16, then each part as a
little-endian u32 length and its bytes. A channel element that is not a frame
is a single records buffer.

Every element spends one credit of its channel. The task acknowledges each
records buffer it processes; the gate turns those into one credit per element
and returns the credit of an element without records (zero data parts: events,
watermarks, idleness) itself, when the task takes it.
"""
from __future__ import annotations

import struct
from collections import deque
from typing import Any

FRAME_MAGIC = 0xC1
_HEADER = struct.Struct("<BH")
_LENGTH = struct.Struct("<I")


def pack_frame(parts: list[bytes], data_parts: int) -> bytes:
    """One frame of ``parts`` (in order), ``data_parts`` of which carry records."""
    out = [_HEADER.pack(FRAME_MAGIC, data_parts)]
    for p in parts:
        out.append(_LENGTH.pack(len(p)))
        out.append(p)
    return b"".join(out)


def is_frame(element: bytes) -> bool:
    return bool(element) and element[0] == FRAME_MAGIC


def split_frame(frame: bytes) -> tuple[int, list[bytes]]:
    """The number of data parts and the parts of a frame made by ``pack_frame``."""
    _, data_parts = _HEADER.unpack_from(frame, 0)
    view = memoryview(frame)
    pos, end = _HEADER.size, len(frame)
    parts: list[bytes] = []
    while pos < end:
        if pos + _LENGTH.size > end:
            raise ValueError("truncated frame")
        (n,) = _LENGTH.unpack_from(frame, pos)
        pos += _LENGTH.size
        if pos + n > end:
            raise ValueError("truncated frame")
        parts.append(bytes(view[pos : pos + n]))
        pos += n
    return data_parts, parts


class FramedInputGate:
    """Wraps an input gate: splits frames into their buffers and returns one credit per element.

    The task acknowledges every records buffer it processes; the channel
    granted one credit for the whole frame, so the acks of a frame's data parts
    but one are absorbed here, and a frame with no data part is acknowledged
    here as it is taken. Parts of a blocked channel wait (alignment).
    """

    def __init__(self, inner: Any, channels: int) -> None:
        self.inner = inner
        self.pending: list[deque[bytes]] = [deque() for _ in range(channels)]
        self.ready: set[int] = set()  # channels with parts waiting in ``pending``
        self.blocked: set[int] = set()
        self.absorb = [0] * channels  # acks to swallow per channel
        # Bytes of every element taken from the channels, frames whole: the same elements, and so the
        # same figure, as the writers' bytes out (a task's parts alone would miss frame headers and events).
        self.bytes_received = 0

    def poll(self, timeout: float) -> tuple[int, bytes] | None:
        for ch in self.ready:
            if ch not in self.blocked:
                q = self.pending[ch]
                part = q.popleft()
                if not q:
                    self.ready.discard(ch)
                return ch, part
        item = self.inner.poll(timeout)
        if item is None:
            return None
        ch, element = item
        self.bytes_received += len(element)
        if not is_frame(element):
            return item
        data_parts, parts = split_frame(element)
        if data_parts == 0:
            self.inner.ack(ch)  # nothing for the task to acknowledge: its credit goes back now
        elif data_parts > 1:
            self.absorb[ch] += data_parts - 1
        if len(parts) > 1:
            self.pending[ch].extend(parts[1:])
            self.ready.add(ch)
        return ch, parts[0]

    def ack(self, channel_index: int) -> None:
        if self.absorb[channel_index]:
            self.absorb[channel_index] -= 1
        else:
            self.inner.ack(channel_index)

    def block(self, channel_index: int) -> None:
        self.blocked.add(channel_index)
        self.inner.block(channel_index)

    def unblock(self, channel_index: int) -> None:
        self.blocked.discard(channel_index)
        self.inner.unblock(channel_index)

    def close(self) -> None:
        self.inner.close()
