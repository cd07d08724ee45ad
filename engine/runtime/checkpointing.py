"""Task-side checkpointing: barrier alignment and the subtask's snapshot.

``BarrierAligner`` is the pure alignment logic: in exactly-once mode a task
stops reading an input once barrier n arrived on it, until barrier n arrived
on every open input; in at-least-once mode it only counts. ``SubtaskCheckpointer``
takes the snapshot: the synchronous part forks a copy-on-write image for heap
keyed state (``forked_snapshot``) and serialises the rest (an immutable copy,
so processing goes on); the asynchronous part writes it to checkpoint storage
in the background and then acknowledges.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from millstream.engine.checkpoint.messages import TaskAck
from millstream.engine.checkpoint.filesystem import is_remote
from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage
from millstream.engine.runtime import forked_snapshot
from millstream.engine.runtime.state.key_grouped_state import RECORD_GROUPS, decode_state, encode_state, encode_state_parts


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


@dataclass(frozen=True)
class AlignmentStep:
    """What the task does after an alignment event: block and unblock channels, snapshot ``ready``
    (the barrier the aligner owns, never the one that merely arrived last), decline ``abandoned``."""

    block: tuple[int, ...] = ()
    unblock: tuple[int, ...] = ()
    ready: Barrier | None = None
    started: float | None = None  # when the alignment of ``ready`` began (monotonic seconds)
    abandoned: int | None = None  # an older checkpoint whose alignment a newer barrier cut short


class BarrierAligner:
    """Which inputs to block, and when a checkpoint's barriers have all arrived (pure).

    As Flink's SingleCheckpointBarrierHandler: one alignment at a time, owned by the barrier that
    started it. A barrier older than the alignment in progress, or of a checkpoint already taken,
    abandoned or aborted, is dropped; a newer one abandons the alignment in progress and starts its
    own. In at-least-once mode nothing is blocked, but the counting is the same.
    """

    def __init__(self, exactly_once: bool) -> None:
        self.exactly_once = exactly_once
        self.barrier: Barrier | None = None  # the alignment in progress
        self.arrived: set[int] = set()
        self.started: float | None = None
        self.done: int = 0  # every checkpoint id up to this one was taken or abandoned
        self._aborted: set[int] = set()  # aborted ids above ``done`` whose barriers may still come

    @property
    def current(self) -> int | None:
        return None if self.barrier is None else self.barrier.checkpoint_id

    def on_barrier(self, channel: int, barrier: Barrier, open_channels: set[int], now: float) -> AlignmentStep:
        cid = barrier.checkpoint_id
        current = self.current
        if cid <= self.done or cid in self._aborted or (current is not None and cid < current):
            return AlignmentStep()  # late: its checkpoint was taken, abandoned or aborted, or a newer one aligns
        unblock: list[int] = []
        abandoned: int | None = None
        if current is not None and cid > current:
            # A newer checkpoint overtook the one aligning: the old one can no longer complete here.
            abandoned = current
            unblock = sorted(self.arrived) if self.exactly_once else []
            self._reset(current)
        if self.barrier is None:
            self.barrier, self.arrived, self.started = barrier, set(), now
        self.arrived.add(channel)
        if self.arrived >= open_channels:
            step = self._ready()
            return AlignmentStep((), tuple(sorted(set(unblock) | set(step.unblock))), step.ready, step.started, abandoned)
        block = (channel,) if self.exactly_once else ()
        return AlignmentStep(block, tuple(unblock), abandoned=abandoned)

    def on_end_of_partition(self, open_channels: set[int]) -> AlignmentStep:
        """An input ended: the alignment in progress may now be complete."""
        if self.barrier is None or not self.arrived >= open_channels:
            return AlignmentStep()
        return self._ready()

    def abort(self, checkpoint_id: int) -> list[int]:
        """Checkpoint ``checkpoint_id`` was aborted: stop aligning it (its barriers, if they still come,
        are dropped). Returns the channels to unblock."""
        if checkpoint_id <= self.done:
            return []
        if self.current != checkpoint_id:
            self._aborted.add(checkpoint_id)
            return []
        unblock = sorted(self.arrived) if self.exactly_once else []
        self._reset(checkpoint_id)
        return unblock

    def _ready(self) -> AlignmentStep:
        barrier, started = self.barrier, self.started
        unblock = tuple(sorted(self.arrived)) if self.exactly_once else ()
        self._reset(barrier.checkpoint_id)  # type: ignore[union-attr]
        return AlignmentStep((), unblock, barrier, started)

    def _reset(self, finished_id: int) -> None:
        """The alignment of ``finished_id`` is over (taken or abandoned): nothing at or below it counts."""
        self.done = max(self.done, finished_id)
        self._aborted = {c for c in self._aborted if c > self.done}
        self.barrier, self.arrived, self.started = None, set(), None


def _release(read_groups: Callable[..., Any]) -> None:
    """End a streamed snapshot's read transaction if it was never read (a write before it failed):
    run once with nothing to consume; one already read refuses a second run, which is fine."""
    try:
        read_groups(lambda groups: None)
    except Exception:
        pass


class SubtaskCheckpointer:
    """Serialises a subtask's operator states and writes them in the background.

    Keyed state that can be snapshotted from a forked copy-on-write image of the process (the heap
    backend's, see ``forked_snapshot``) comes as ``deferred`` callables: the task thread only forks,
    and the child groups, pickles and writes everything. Anything else is pickled on the task thread
    (an immutable copy) and written by the writer thread, as before.
    """

    def __init__(
        self,
        job_id: str,
        vertex_id: str,
        subtask: int,
        acknowledge: Callable[[int, TaskAck], None],
        decline: Callable[[int, str], None],
        fork_snapshots: bool = True,
    ) -> None:
        self.job_id = job_id
        self.task = (vertex_id, subtask)
        self.acknowledge = acknowledge
        self.decline = decline
        self.fork_snapshots = fork_snapshots and forked_snapshot.available()
        self._writer: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        # Incremental snapshots, per checkpoint id: (bytes of the new shared file, bytes of its whole
        # chain), set on the writer thread; the checkpoint's state size is its chain, what it wrote
        # (Flink's checkpointed size) only the new file.
        self.shared_bytes: dict[int, tuple[int, int]] = {}

    def snapshot(
        self,
        barrier: Barrier,
        states: dict[str, Any],
        source_offsets: dict[str, Any],
        alignment_ms: int,
        start_delay_ms: int,
        deferred: dict[str, Callable[[], dict[str, Any]]] | None = None,
        background: dict[str, Callable[[], dict[str, Any]]] | None = None,
        started: float | None = None,
    ) -> None:
        """``deferred``: operator id -> a callable returning more entries of that operator's state
        dict (its keyed state), run in a forked child when possible, else here. ``background``: the
        same, but always run on the writer thread (it reads a view the backend opened for it).
        ``started``: the ``time.monotonic()`` the reported synchronous duration counts from, set back
        by the time the task's operators took to snapshot (what Flink counts as synchronous)."""
        t0 = time.monotonic() if started is None else started
        if deferred and self.fork_snapshots:
            try:
                child = forked_snapshot.ForkedSnapshot.start(lambda: self._materialise_and_write(barrier, states, deferred))
            except OSError:
                child = None  # no fork now (memory, process limits): this one is taken the synchronous way
            if child is not None:
                sync_ms = int((time.monotonic() - t0) * 1000)
                self._submit(self._await_child, barrier, child, source_offsets, sync_ms, alignment_ms, start_delay_ms)
                return
        try:
            full = _merge(states, deferred)
            blobs = {op_id: encode_state(state) for op_id, state in full.items()}
        except Exception as e:  # unpicklable user state: this checkpoint fails, the job goes on
            self.decline(barrier.checkpoint_id, f"state of subtask {self.task} could not be serialised: {e}")
            return
        sync_ms = int((time.monotonic() - t0) * 1000)
        self._submit(self._write, barrier, blobs, source_offsets, sync_ms, alignment_ms, start_delay_ms, background)

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        with self._lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-writer")
            self._writer.submit(fn, *args)

    def prestart(self) -> None:
        """Start the writer thread now, for a task that will take periodic checkpoints: started by the
        first one, it was in that checkpoint's synchronous part (a thread start waits for the new
        thread to run, 10-30 ms behind busy threads, the slowest pause of a run)."""
        self._submit(_no_op)

    def _materialise_and_write(
        self, barrier: Barrier, states: dict[str, Any], deferred: dict[str, Callable[[], dict[str, Any]]]
    ) -> tuple[dict[str, str], int] | dict[str, bytes]:
        """In the forked child: the whole snapshot, pickled and written; returns (handles, bytes). For a
        remote store the pickled blobs come back instead and the writer thread uploads them: a child
        forked from a multithreaded process must not open connections or import (another thread may
        have held a lock the child inherits, as fsspec's import did)."""
        full = _merge(states, deferred)
        blobs = {op_id: encode_state(state) for op_id, state in full.items()}
        if is_remote(barrier.location or ""):
            return blobs
        return self._write_blobs(barrier, blobs), sum(len(b) for b in blobs.values())

    def _write_blobs(self, barrier: Barrier, blobs: dict[str, bytes]) -> dict[str, str]:
        if barrier.location is None:
            raise OSError("no checkpoint storage is configured")
        storage = FileSystemCheckpointStorage(barrier.location)
        return {
            op_id: storage.write_task_state(self.job_id, barrier.checkpoint_id, self.task, op_id, data, location=barrier.location)
            for op_id, data in blobs.items()
        }

    def _write_streamed(
        self, barrier: Barrier, op_id: str, state: dict[str, Any], read_groups: Callable[..., Any]
    ) -> tuple[str, int]:
        """Write one operator's state whose records ``read_groups(consume)`` hands over a key group
        at a time from the barrier's view of the state (``begin_snapshot_parts``): each part is encoded,
        sealed and appended as it is read, so the state is never whole in memory. (handle, bytes)."""
        if barrier.location is None:
            raise OSError("no checkpoint storage is configured")
        storage = FileSystemCheckpointStorage(barrier.location)

        def write(groups: Any) -> tuple[str, int]:
            payload, parts = encode_state_parts(state, groups)
            return storage.write_task_state_parts(
                self.job_id, barrier.checkpoint_id, self.task, op_id, payload, parts, location=barrier.location
            )

        return read_groups(write)

    def _await_child(
        self,
        barrier: Barrier,
        child: "forked_snapshot.ForkedSnapshot",
        source_offsets: dict[str, Any],
        sync_ms: int,
        alignment_ms: int,
        start_delay_ms: int,
    ) -> None:
        t0 = time.monotonic()
        try:
            result = child.result()
            if isinstance(result, dict):  # pickled by the child, for a remote store: written here
                handles, size = self._write_blobs(barrier, result), sum(len(b) for b in result.values())
            else:
                handles, size = result
        except Exception as e:
            self.decline(barrier.checkpoint_id, f"subtask {self.task[1]} of {self.task[0]} could not write its state: {e}")
            return
        self._ack(barrier, handles, size, sync_ms, int((time.monotonic() - t0) * 1000), alignment_ms, start_delay_ms, source_offsets)

    def _write(
        self,
        barrier: Barrier,
        blobs: dict[str, bytes],
        source_offsets: dict[str, Any],
        sync_ms: int,
        alignment_ms: int,
        start_delay_ms: int,
        background: dict[str, Callable[[], dict[str, Any]]] | None = None,
    ) -> None:
        t0 = time.monotonic()
        shared: dict[str, tuple[str, ...]] = {}
        streamed_size = 0
        streamed: dict[str, tuple[dict[str, Any], Callable[..., Any]]] = {}
        try:
            for op_id, complete in (background or {}).items():
                state = decode_state(blobs[op_id])
                state.update(complete())
                # an incremental snapshot's chain: files in the job's shared/ directory it refers to
                shared[op_id] = tuple(f["name"] for f in (state.get("chain") or state.get("heap_chain") or ()))
                groups = state.pop(RECORD_GROUPS, None)
                if groups is not None:  # the on-disk backend's records: written as they are read
                    streamed[op_id] = (state, groups)
                    del blobs[op_id]
                else:
                    blobs[op_id] = encode_state(state)
            handles = self._write_blobs(barrier, blobs)
            for op_id, (state, groups) in streamed.items():
                handles[op_id], n = self._write_streamed(barrier, op_id, state, groups)
                streamed_size += n
        except Exception as e:
            for _, groups in streamed.values():
                _release(groups)
            self.shared_bytes.pop(barrier.checkpoint_id, None)
            self.decline(barrier.checkpoint_id, f"subtask {self.task[1]} of {self.task[0]} could not write its state: {e}")
            return
        size = sum(len(b) for b in blobs.values()) + streamed_size
        new, referred = self.shared_bytes.pop(barrier.checkpoint_id, (0, 0))
        self._ack(
            barrier, handles, size + referred, sync_ms, int((time.monotonic() - t0) * 1000), alignment_ms, start_delay_ms,
            source_offsets, {op: names for op, names in shared.items() if names},
            checkpointed_size=size + new if shared else None,
        )

    def _ack(
        self,
        barrier: Barrier,
        handles: dict[str, str],
        size: int,
        sync_ms: int,
        async_ms: int,
        alignment_ms: int,
        start_delay_ms: int,
        source_offsets: dict[str, Any],
        shared_files: dict[str, tuple[str, ...]] | None = None,
        checkpointed_size: int | None = None,
    ) -> None:
        ack = TaskAck(
            state_handles=handles,
            state_size=size,
            sync_ms=sync_ms,
            async_ms=async_ms,
            alignment_ms=alignment_ms,
            persisted_bytes=size if checkpointed_size is None else checkpointed_size,
            start_delay_ms=start_delay_ms,
            ack_timestamp=int(time.time() * 1000),
            source_offsets=source_offsets,
            shared_files=shared_files or {},
            checkpointed_size=checkpointed_size,
        )
        self.acknowledge(barrier.checkpoint_id, ack)

    def close(self) -> None:
        """Let writes in flight finish (their acks still count), then stop the writer."""
        with self._lock:
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None


def _no_op() -> None:
    pass


def _merge(states: dict[str, Any], deferred: dict[str, Callable[[], dict[str, Any]]] | None) -> dict[str, Any]:
    if not deferred:
        return states
    return {op_id: {**state, **deferred[op_id]()} if op_id in deferred else state for op_id, state in states.items()}
