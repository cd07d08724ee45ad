"""Task-side checkpointing: barrier alignment and the subtask's snapshot.

``BarrierAligner`` is the pure alignment logic: in exactly-once mode a task
stops reading an input once barrier n arrived on it, until barrier n arrived
on every open input; in at-least-once mode it only counts. ``SubtaskCheckpointer``
takes the snapshot: the synchronous part serialises every operator's state
(an immutable copy, so processing goes on), the asynchronous part writes it
to checkpoint storage on a background thread and then acknowledges.
"""
from __future__ import annotations

import pickle
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from engine.checkpoint.messages import TaskAck
from engine.checkpoint.storage import FileSystemCheckpointStorage


@dataclass(frozen=True)
class Barrier:
    checkpoint_id: int
    timestamp: int  # when the coordinator triggered it (epoch ms)
    location: str | None  # the checkpoint's directory
    checkpoint_type: str = "CHECKPOINT"
    # Stop-with-savepoint only: advance to the end of event time (MAX_WATERMARK) once it completes.
    drain: bool = False

    @property
    def is_sync_savepoint(self) -> bool:
        """A stop-with-savepoint: the job finishes once this savepoint completes."""
        return self.checkpoint_type == "SYNC_SAVEPOINT"

    def to_wire(self) -> tuple[Any, ...]:
        return (self.checkpoint_id, self.timestamp, self.location, self.checkpoint_type, self.drain)

    @staticmethod
    def from_wire(t: Any) -> "Barrier":
        # Senders older than the drain flag send 4-tuples.
        return Barrier(int(t[0]), int(t[1]), t[2], t[3], bool(t[4]) if len(t) > 4 else False)


class BarrierAligner:
    """Which inputs to block, and when a checkpoint's barriers have all arrived (pure)."""

    def __init__(self, exactly_once: bool) -> None:
        self.exactly_once = exactly_once
        self.current: int | None = None
        self.arrived: set[int] = set()
        self.started: float | None = None
        self.done: int = 0  # the last checkpoint id taken

    def on_barrier(self, channel: int, checkpoint_id: int, open_channels: set[int], now: float) -> tuple[list[int], list[int], bool]:
        """Returns (channels to block, channels to unblock, whether to snapshot now)."""
        if checkpoint_id <= self.done:
            return [], [], False  # a late barrier of a checkpoint already taken (or abandoned)
        unblock: list[int] = []
        if self.current is not None and checkpoint_id > self.current:
            # A newer checkpoint overtook one still aligning: the old one is abandoned, as in Flink.
            unblock = sorted(self.arrived)
            self.current = None
        if self.current is None:
            self.current, self.arrived, self.started = checkpoint_id, set(), now
        self.arrived.add(channel)
        block = [channel] if self.exactly_once else []
        if self.arrived >= open_channels:
            return [], sorted(set(unblock) | self.arrived) if self.exactly_once else unblock, True
        return block, unblock, False

    def on_end_of_partition(self, open_channels: set[int]) -> bool:
        """An input ended: the alignment in progress may now be complete."""
        return self.current is not None and self.arrived >= open_channels

    def abort(self, checkpoint_id: int) -> list[int]:
        """Checkpoint ``checkpoint_id`` was aborted: stop aligning it. Returns the channels to unblock."""
        if self.current != checkpoint_id:
            if self.current is None:
                self.done = max(self.done, checkpoint_id)  # its barriers, if they still come, are ignored
            return []
        unblock = sorted(self.arrived) if self.exactly_once else []
        self.done = checkpoint_id
        self.current, self.arrived, self.started = None, set(), None
        return unblock

    def complete(self) -> tuple[int, float]:
        """Mark the current checkpoint taken; returns its id and when alignment started."""
        cid, started = self.current, self.started
        self.done = cid  # type: ignore[assignment]
        self.current, self.arrived, self.started = None, set(), None
        return cid, (time.monotonic() if started is None else started)  # type: ignore[return-value]


class SubtaskCheckpointer:
    """Serialises a subtask's operator states and writes them in the background."""

    def __init__(
        self,
        job_id: str,
        vertex_id: str,
        subtask: int,
        acknowledge: Callable[[int, TaskAck], None],
        decline: Callable[[int, str], None],
    ) -> None:
        self.job_id = job_id
        self.task = (vertex_id, subtask)
        self.acknowledge = acknowledge
        self.decline = decline
        self._writer: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def snapshot(
        self,
        barrier: Barrier,
        states: dict[str, Any],
        source_offsets: dict[str, Any],
        alignment_ms: int,
        start_delay_ms: int,
    ) -> None:
        t0 = time.monotonic()
        try:
            blobs = {op_id: pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL) for op_id, state in states.items()}
        except Exception as e:  # unpicklable user state: this checkpoint fails, the job goes on
            self.decline(barrier.checkpoint_id, f"state of subtask {self.task} could not be serialised: {e}")
            return
        sync_ms = int((time.monotonic() - t0) * 1000)
        with self._lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-writer")
            self._writer.submit(self._write, barrier, blobs, source_offsets, sync_ms, alignment_ms, start_delay_ms)

    def _write(
        self,
        barrier: Barrier,
        blobs: dict[str, bytes],
        source_offsets: dict[str, Any],
        sync_ms: int,
        alignment_ms: int,
        start_delay_ms: int,
    ) -> None:
        t0 = time.monotonic()
        try:
            if barrier.location is None:
                raise OSError("no checkpoint storage is configured")
            storage = FileSystemCheckpointStorage(barrier.location)
            handles = {
                op_id: storage.write_task_state(
                    self.job_id, barrier.checkpoint_id, self.task, op_id, data, location=barrier.location
                )
                for op_id, data in blobs.items()
            }
        except Exception as e:
            self.decline(barrier.checkpoint_id, f"subtask {self.task[1]} of {self.task[0]} could not write its state: {e}")
            return
        size = sum(len(b) for b in blobs.values())
        ack = TaskAck(
            state_handles=handles,
            state_size=size,
            sync_ms=sync_ms,
            async_ms=int((time.monotonic() - t0) * 1000),
            alignment_ms=alignment_ms,
            persisted_bytes=size,
            start_delay_ms=start_delay_ms,
            ack_timestamp=int(time.time() * 1000),
            source_offsets=source_offsets,
        )
        self.acknowledge(barrier.checkpoint_id, ack)

    def close(self) -> None:
        """Let writes in flight finish (their acks still count), then stop the writer."""
        with self._lock:
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None
