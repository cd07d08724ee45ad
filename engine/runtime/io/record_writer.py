"""RecordWriter: buffers one output edge's records per channel and flushes them.

A channel's buffer is flushed when it holds ``buffer_records`` records or when
its oldest record has waited ``buffer_timeout_ms``: Flink's latency/throughput knob.
"""
from __future__ import annotations

import time
from typing import Any

from engine.runtime.io.channel import ChannelWriter
from engine.runtime.io.serialization import RECORDS, STATUS, WATERMARK, BufferSerializer
from engine.runtime.partitioner import StreamPartitioner
from engine.runtime.task_metrics import TaskIOMetrics


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

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        for ch, vals, ts in self.partitioner.split(values, timestamps):
            buf = self.values[ch]
            if not buf:
                self.first_at[ch] = time.monotonic()
                if ts is not None:
                    self.stamps[ch] = []
            elif (ts is None) != (self.stamps[ch] is None):
                self._flush(ch)  # timestamped and plain records never share a buffer
                self.first_at[ch] = time.monotonic()
                self.stamps[ch] = [] if ts is not None else None
            buf.extend(vals)
            if ts is not None:
                self.stamps[ch].extend(ts)  # type: ignore[union-attr]
            if len(buf) >= self.buffer_records:
                self._flush(ch)

    def _flush(self, ch: int) -> None:
        buf = self.values[ch]
        if not buf:
            return
        payload = self.serializer.encode(RECORDS, buf, self.stamps[ch])
        self.values[ch] = []
        self.stamps[ch] = None
        self.first_at[ch] = None
        self.metrics.backpressured_s += self.writers[ch].send(payload, True)
        self.metrics.records_out += len(buf)
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
        self.broadcast_event(WATERMARK, watermark)

    def emit_status(self, idle: bool) -> None:
        self.broadcast_event(STATUS, idle)

    def broadcast_event(self, kind: int, a: Any = None, b: Any = None) -> None:
        """Events follow every record already written, on every channel."""
        self.flush_all()
        payload = self.serializer.encode(kind, a, b)
        for w in self.writers:
            w.send(payload, False)
