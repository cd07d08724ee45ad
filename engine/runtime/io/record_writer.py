"""RecordWriter: buffers one output edge's records per channel and flushes them.

A channel's buffer is flushed when it holds ``buffer_records`` records or when
its oldest record has waited ``buffer_timeout_ms``: Flink's latency/throughput knob.
Watermarks do not flush: as in Flink they are written into the channel's
buffer after the records before them and travel with them in one frame
(``frames.py``), so a per-batch watermark costs no extra round trip and does
not cut buffers short. Barriers, idleness and end-of-partition still flush
every channel and travel alone.

Every channel element spends one credit, records or not: a source that only
emits watermarks or idleness to a consumer that reads nothing blocks like any
other, so the channel's bound holds for every element. An element without
records travels as a frame that says so (no data parts), and the consumer's
gate returns its credit as soon as the task takes it (``FramedInputGate``).
"""
from __future__ import annotations

import random
import time
from typing import Any

from millstream.engine.runtime.io.channel import ChannelWriter
from millstream.engine.runtime.io.frames import pack_frame
from millstream.engine.runtime.io.serialization import LATENCY_MARKER, RECORDS, STATUS, WATERMARK, BufferSerializer
from millstream.engine.runtime.partitioner import StreamPartitioner
from millstream.engine.runtime.task_metrics import TaskIOMetrics


class RecordWriter:
    def __init__(
        self,
        partitioner: StreamPartitioner,
        writers: list[ChannelWriter],
        serializer: BufferSerializer,
        metrics: TaskIOMetrics,
        buffer_records: int,
        buffer_timeout_ms: int,
    ) -> None:
        self.partitioner = partitioner
        self.writers = writers
        self.serializer = serializer
        self.metrics = metrics
        self.buffer_records = max(1, buffer_records)
        # A negative timeout (Flink's -1) means flush only when full or at the end.
        self.timeout_s = buffer_timeout_ms / 1000 if buffer_timeout_ms >= 0 else float("inf")
        n = len(writers)
        self.values: list[list[Any]] = [[] for _ in range(n)]
        self.stamps: list[list[int] | None] = [None] * n
        self.first_at: list[float | None] = [None] * n
        # Already-encoded buffers waiting ahead of ``values`` in the channel's next frame.
        self.parts: list[list[bytes]] = [[] for _ in range(n)]
        self.part_records = [0] * n  # records in those parts
        self.data_parts = [0] * n  # how many of those parts carry records
        self.watermark_last = [False] * n  # the last part is a watermark (a newer one replaces it)

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        for ch, vals, ts in self.partitioner.split(values, timestamps):
            buf = self.values[ch]
            if not buf:
                if self.first_at[ch] is None:
                    self.first_at[ch] = time.monotonic()
                if ts is not None:
                    self.stamps[ch] = []
            elif (ts is None) != (self.stamps[ch] is None):
                self._close_part(ch)  # timestamped and plain records never share a buffer
                self.stamps[ch] = [] if ts is not None else None
                buf = self.values[ch]
            buf.extend(vals)
            if ts is not None:
                self.stamps[ch].extend(ts)  # type: ignore[union-attr]
            if len(buf) + self.part_records[ch] >= self.buffer_records:
                self._flush(ch)

    def _close_part(self, ch: int) -> None:
        """Encode the channel's pending records as one buffer of its next frame."""
        buf = self.values[ch]
        self.parts[ch].append(self.serializer.encode(RECORDS, buf, self.stamps[ch]))
        self.part_records[ch] += len(buf)
        self.data_parts[ch] += 1
        self.watermark_last[ch] = False
        self.values[ch] = []
        self.stamps[ch] = None

    def _flush(self, ch: int) -> None:
        parts = self.parts[ch]
        if not parts:
            buf = self.values[ch]
            if not buf:
                return
            payload = self.serializer.encode(RECORDS, buf, self.stamps[ch])
            records = len(buf)
            self.values[ch] = []
            self.stamps[ch] = None
        else:
            if self.values[ch]:
                self._close_part(ch)
            records, data = self.part_records[ch], self.data_parts[ch]
            # A lone records buffer goes as it is; anything else as a frame that counts its records parts.
            payload = parts[0] if len(parts) == 1 and data == 1 else pack_frame(parts, data)
            self.parts[ch] = []
            self.part_records[ch] = 0
            self.data_parts[ch] = 0
            self.watermark_last[ch] = False
        self.first_at[ch] = None
        self.metrics.backpressured_s += self.writers[ch].send(payload, True)
        self.metrics.records_out += records
        self.metrics.bytes_out += len(payload)

    def blocked_since(self) -> float | None:
        waits = [w.blocked_since for w in self.writers if w.blocked_since is not None]
        return min(waits) if waits else None

    def flush_all(self) -> None:
        for ch in range(len(self.writers)):
            self._flush(ch)

    def flush_due(self, now: float) -> float:
        """Flush channels whose timeout passed; return seconds until the next one is due."""
        next_due = float("inf")
        for ch, t in enumerate(self.first_at):
            if t is None:
                continue
            due = t + self.timeout_s
            if due <= now:
                self._flush(ch)
            else:
                next_due = min(next_due, due - now)
        return next_due

    def emit_watermark(self, watermark: int) -> None:
        """Queue the watermark behind every record already written, on every channel; no flush."""
        payload = self.serializer.encode(WATERMARK, watermark)
        now: float | None = None
        for ch in range(len(self.writers)):
            if self.values[ch]:
                self._close_part(ch)
            elif self.watermark_last[ch]:
                # No record since the last watermark: the newer one says everything it said.
                self.parts[ch][-1] = payload
                continue
            self.parts[ch].append(payload)
            self.watermark_last[ch] = True
            if self.first_at[ch] is None:
                if now is None:
                    now = time.monotonic()
                self.first_at[ch] = now

    def emit_latency_marker(self, marker: list[Any]) -> None:
        """Queue a latency marker behind the records already written to one random channel (Flink's
        ``randomEmit``): like a watermark it waits for the buffer to flush, so it measures that wait too."""
        if not self.writers:
            return
        ch = random.randrange(len(self.writers)) if len(self.writers) > 1 else 0
        if self.values[ch]:
            self._close_part(ch)
        self.parts[ch].append(self.serializer.encode(LATENCY_MARKER, marker))
        self.watermark_last[ch] = False  # a later watermark must not overwrite the marker
        if self.first_at[ch] is None:
            self.first_at[ch] = time.monotonic()

    def emit_status(self, idle: bool) -> None:
        self.broadcast_event(STATUS, idle)

    def broadcast_event(self, kind: int, a: Any = None, b: Any = None) -> None:
        """Events follow every record already written, on every channel, each spending a credit."""
        self.flush_all()
        payload = pack_frame([self.serializer.encode(kind, a, b)], 0)
        for w in self.writers:
            self.metrics.backpressured_s += w.send(payload, True)
            self.metrics.bytes_out += len(payload)  # every element counts, as the reading side counts it

    def close(self) -> None:
        """Wait until every buffer sent has been taken by its channel."""
        for w in self.writers:
            w.close()
