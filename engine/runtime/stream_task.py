"""StreamTask: runs one subtask, a chain of operators, on its thread.

A source task polls its reader and pushes batches down the chain; any other
task reads buffers from its input gate. Both flush record writers on the
buffer timeout, finish on end of input by sending END_OF_PARTITION on every
output channel, and measure busy, idle and backpressured time.

Checkpoints: sources take them between batches when triggered, other tasks
when barriers are aligned; what goes into the snapshot and comes back out of
it (keyed state and timers by key group, operator and function state, source
splits) is in ``millstream.engine.runtime.state.task_state_manager``. A stop-with-savepoint
(SYNC_SAVEPOINT) halts the sources at its barrier; every task finishes once it
completes, ending event time only when asked to drain.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from millstream.engine.graph.stream_graph import StreamGraph
from millstream.engine.graph.transformations import OperatorKind
from millstream.engine.runtime.deployment import TaskDeploymentDescriptor
from millstream.engine.runtime.io.channel import ChannelFactory, ChannelId, TaskCancelled
from millstream.engine.checkpoint.messages import TaskAck
from millstream.engine.checkpoint.rescale import TaskRestore
from millstream.engine.checkpoint.state_origin import StateOrigin
from millstream.engine.checkpoint.storage import (
    FileSystemCheckpointStorage,
    iter_shared_parts,
    read_shared_file,
    shared_dir_of_checkpoint,
    write_shared_file,
)
from millstream.engine.runtime.batch_slicer import BatchSlicer
from millstream.engine.runtime.collect import CollectGateway
from millstream.engine.runtime.checkpointing import AlignmentStep, Barrier, BarrierAligner, SubtaskCheckpointer
from millstream.engine.runtime.io.serialization import (
    BARRIER,
    END_OF_PARTITION,
    LATENCY_MARKER,
    RECORDS,
    STATUS,
    WATERMARK,
    create_serializer,
)
from millstream.engine.runtime.operator_chain import build_operator_chain
from millstream.engine.runtime.operators.base import Output, StreamingRuntimeContext, StreamOperator
from millstream.engine.runtime.io.record_writer import RecordWriter
from millstream.engine.runtime.latency_markers import (
    LatencyMarker,
    LatencyStats,
    MarkerSchedule,
    history_size,
    latency_interval_ms,
)
from millstream.engine.runtime.state.operator_state import FunctionStateHandler
from millstream.engine.runtime.state.task_state_manager import (
    restore_function_state,
    restore_keyed,
    restore_operator_state,
    restore_splits,
    snapshot_keyed,
    snapshot_heap_incremental,
    snapshot_keyed_async,
    snapshot_keyed_incremental,
    snapshot_keyed_tables,
)
from millstream.engine.checkpoint.filesystem import is_remote
from millstream.engine.runtime.state.state_chain import FOOTER, SharedFile, chain_sizes, encode_index, written_file
from millstream.engine.runtime.state.state_downloader import transfer_threads
from millstream.engine.runtime.state.state_records import record_keys_of
from millstream.engine.runtime.state.state_uploader import Uploads
from millstream.engine.runtime.state.key_grouped_state import decode_state, decode_state_parts
from millstream.engine.runtime.task_metrics import TaskIOMetrics
from millstream.engine.runtime.user_code_class_loader import activate_user_code
from millstream.engine.runtime.watermarks import MAX_WATERMARK, StatusWatermarkValve

SOURCE_BATCH = 1024
TICK_S = 0.05  # how often operators' on_tick runs (processing-time timers, idleness)


def _read_state(handle: Any, origin: StateOrigin, key_groups: range | None = None) -> Any:
    """An old subtask's state file of checkpoint ``origin``; of a key-grouped one only the parts of
    ``key_groups`` (all when None)."""
    if key_groups is None:
        return decode_state(FileSystemCheckpointStorage.read_state_file(handle, origin))
    return decode_state(FileSystemCheckpointStorage.read_state_file_key_groups(handle, key_groups, origin))


def _read_state_into(handle: Any, origin: StateOrigin, key_groups: range, backend: Any) -> Any:
    """As ``_read_state`` for the keyed head of an on-disk backend (``restore_records``): the parts of
    ``key_groups`` are read a batch at a time and their raw records put into ``backend`` as each is
    read (issue 16: a restore holds one key group's records, never the file); the state returned has
    no ``records``. A file in the older single-blob format is read whole, as before."""
    opened = FileSystemCheckpointStorage.read_state_file_parts(handle, key_groups, origin)
    if isinstance(opened, bytes):
        return decode_state(opened)

    def put(state: Any, name: str, rows: list) -> None:
        kinds = state.get("kinds") or {}
        backend.restore_records(name, kinds.get(name, "value"), rows, False, record_keys_of(kinds))

    return decode_state_parts(*opened, put)


def _keyed_snapshot(backend: Any, op: StreamOperator, by_key_group: bool = False) -> Callable[[], dict[str, Any]]:
    def materialise() -> dict[str, Any]:
        return snapshot_keyed_tables(backend, op, by_key_group)

    return materialise


def _keyed_snapshot_async(backend: Any, op: StreamOperator) -> Callable[[], dict[str, Any]]:
    return snapshot_keyed_async(backend, op, streamed=True)  # the writer thread streams its records to the file


@dataclass
class TaskEnvironment:
    """What the hosting process gives a task: channels, stdout and the result collector."""

    channels: ChannelFactory
    cancelled: threading.Event
    print_line: Callable[[str], None] = print
    collect: CollectGateway | None = None  # where a collect sink sends its results
    state_dir: str | None = None  # where on-disk keyed state goes (state.backend=rocksdb)
    # Checkpoint acknowledgements and declines go to the JobManager through these.
    checkpoint_ack: Callable[[int, TaskAck], None] | None = None
    # ``(checkpoint_id, reason, not_ready=False)``; ``not_ready``: the task could not take it (it ended,
    # or a newer barrier overtook it), which Flink does not count as a checkpoint failure.
    checkpoint_decline: Callable[..., None] | None = None


class StreamTask:
    def __init__(self, tdd: TaskDeploymentDescriptor, graph: StreamGraph, env: TaskEnvironment) -> None:
        self.tdd = tdd
        self.graph = graph
        self.env = env
        self.metrics = TaskIOMetrics()
        # Latency markers (engine/runtime/latency_markers.py); None while tracking is off (the default).
        self.latency_interval_ms = latency_interval_ms(tdd.config)
        self.latency: LatencyStats | None = None
        if self.latency_interval_ms > 0:
            self.latency = LatencyStats(
                # A source does not measure its own markers; the operators chained to it do (as in Flink).
                (graph.nodes[n].operator_id for n in tdd.operators
                 if graph.transformations[n].kind is not OperatorKind.SOURCE),
                tdd.subtask,
                history_size(tdd.config),
            )
            self.metrics.latency = self.latency
        self.name = f"{tdd.vertex_name} ({tdd.subtask + 1}/{tdd.parallelism})#{tdd.attempt}"
        cfg = tdd.config
        self.serializer = create_serializer(str(cfg.get("pipeline.serializer", "msgpack")))
        self.buffer_records = int(cfg.get("taskmanager.buffer-records", 1024))
        self.buffer_timeout_ms = int(cfg.get("execution.buffer-timeout", 10))
        # The operator chain, built by ``run`` on the task's thread (see operator_chain.py).
        self.writers: list[RecordWriter] = []
        self.outputs: dict[int, Output] = {}
        self.keyed_backend: Any = None
        ckpt = cfg.get("execution.checkpointing") or {}
        self.exactly_once = ckpt.get("mode", "EXACTLY_ONCE") == "EXACTLY_ONCE"
        # Filled by the hosting process's threads, drained by the task's own thread.
        self.triggers: deque[Barrier] = deque()
        self._triggers_lock = threading.Lock()
        self._triggers_closed = False  # the source loop ended: a trigger now is declined at once
        self.completed_notifications: deque[int] = deque()
        self.aborted_notifications: deque[int] = deque()
        # Stop-with-savepoint: the SYNC_SAVEPOINT barrier this task snapshotted, until it is aborted;
        # ``_stopping`` once it completed and the task is to finish.
        self._savepoint_stop: Barrier | None = None
        self._stopping = False
        if tdd.finish_barrier is not None:
            # Restored from a stop-with-savepoint that completed: end now, as the task would have then
            # (sources read nothing; event time ends only if that stop drained).
            self._savepoint_stop = Barrier.from_wire(tdd.finish_barrier)
            self._stopping = True
        self.checkpointer: SubtaskCheckpointer | None = None
        if env.checkpoint_ack is not None and env.checkpoint_decline is not None:
            self.checkpointer = SubtaskCheckpointer(
                tdd.job_id, tdd.vertex_id, tdd.subtask, env.checkpoint_ack, env.checkpoint_decline
            )
        self.reader: Any = None
        self.restored_position: Any = None
        self.restored_checkpoint_id: int | None = None
        self.restored_functions: dict[int, Any] = {}  # node -> CheckpointedFunction state restored
        self.function_states: dict[int, FunctionStateHandler] = {}
        self.operators: dict[int, StreamOperator] = {}

    def sample_metrics(self) -> dict[str, Any]:
        waits = [t for t in (w.blocked_since() for w in self.writers) if t is not None]
        return self.metrics.sample(blocked_since=min(waits) if waits else None)

    def cancel(self) -> None:
        self.env.cancelled.set()

    def trigger_checkpoint(self, barrier: Barrier) -> None:
        """From another thread: a source subtask takes checkpoint ``barrier`` between two batches,
        or, once its input ended, declines it at once (so the checkpoint fails fast, uncounted)."""
        with self._triggers_lock:
            if not self._triggers_closed:
                self.triggers.append(barrier)
                return
        self._decline(barrier.checkpoint_id, "the source subtask reached the end of its input")

    def _close_triggers(self) -> None:
        """The source loop ended: decline what it left unread and whatever comes later."""
        with self._triggers_lock:
            self._triggers_closed = True
            left = list(self.triggers)
            self.triggers.clear()
        for barrier in left:
            self._decline(barrier.checkpoint_id, "the source subtask reached the end of its input")

    def _decline(self, checkpoint_id: int, reason: str) -> None:
        """Decline a checkpoint this task will not take, as not ready (not a checkpoint failure)."""
        decline = self.env.checkpoint_decline
        if decline is not None:
            decline(checkpoint_id, f"{self.name}: {reason}", True)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.completed_notifications.append(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """From another thread: checkpoint ``checkpoint_id`` will never complete."""
        self.aborted_notifications.append(checkpoint_id)

    # -- checkpoints ---------------------------------------------------------
    def _take_checkpoint(self, barrier: Barrier, alignment_ms: int) -> None:
        """Snapshot every operator of the chain, then send the barrier on (it follows every record
        that the snapshot covers), then write the snapshot in the background."""
        # Flink's synchronous duration: the operators' snapshots (an on-disk backend's barrier records,
        # a change-set swap) and the hand-over to the writer thread; sending the barrier on is not in it.
        started = time.monotonic()
        head = self.tdd.operators[0]
        cid, ts = barrier.checkpoint_id, barrier.timestamp
        states: dict[str, Any] = {}
        deferred: dict[str, Callable[[], dict[str, Any]]] = {}
        background: dict[str, Callable[[], dict[str, Any]]] = {}
        offsets: dict[str, Any] = {}
        reader = self.reader if head not in self.operators else None
        # A push source (SourceFunction) hands over what it queued and pauses under its checkpoint lock.
        prepare = getattr(reader, "prepare_snapshot", None)
        locked = prepare is not None
        try:
            if prepare is not None:
                queued = prepare()
                if queued:
                    self.outputs[head].emit(queued, None)
            for node_id in self.tdd.operators:  # head first: what an operator emits here reaches the next
                op = self.operators.get(node_id)
                if op is not None:
                    op.prepare_snapshot_pre_barrier(cid)
            for node_id in self.tdd.operators:
                op_id = self.graph.nodes[node_id].operator_id
                op = self.operators.get(node_id)
                if op is None:  # the source: its splits, and a SourceFunction's operator state
                    splits = list(reader.snapshot()) if reader is not None else []
                    fn_state = getattr(reader, "snapshot_function_state", None)
                    states[op_id] = {"splits": splits, "function": fn_state(cid, ts) if fn_state else None}
                    offsets[op_id] = splits
                    continue
                state: dict[str, Any] = {"operator": op.snapshot_state()}
                handler = self.function_states.get(node_id)
                if handler is not None:
                    state["function"] = handler.snapshot(cid, ts)
                if node_id == head and self.keyed_backend is not None:
                    incremental = getattr(self.keyed_backend, "changes", None) is not None and self._incremental_ok(barrier)
                    if incremental and getattr(self.keyed_backend, "snapshot_in_fork", False):
                        # the heap backend's: a delta on the writer thread (of every key where a base is due)
                        background[op_id] = self._heap_incremental_snapshot(op, op_id, barrier)
                    elif getattr(self.keyed_backend, "snapshot_in_fork", False):
                        # taken in a forked child; a savepoint's grouped by key group there, so a rescaled
                        # restore reads only its key groups (a periodic checkpoint's is not: grouping
                        # costs the child 2-3x the whole pickle even with the batch hash, more than a
                        # 2 s interval at 3 M keys, see docs/large-state.md change 8)
                        by_kg = barrier.checkpoint_type != "CHECKPOINT"
                        deferred[op_id] = _keyed_snapshot(self.keyed_backend, op, by_kg)
                    elif incremental:
                        background[op_id] = self._incremental_snapshot(op, op_id, barrier)  # a base or a delta
                    elif hasattr(self.keyed_backend, "begin_snapshot"):
                        background[op_id] = _keyed_snapshot_async(self.keyed_backend, op)  # read on the writer thread
                    else:
                        state["keyed"], state["kinds"] = snapshot_keyed(self.keyed_backend, op)
                states[op_id] = state
        finally:
            if locked:
                reader.finish_snapshot()
        snapshots_s = time.monotonic() - started
        for w in self.writers:
            w.broadcast_event(BARRIER, barrier.to_wire())
        if self.checkpointer is not None:
            delay = max(int(time.time() * 1000) - barrier.timestamp, 0)
            self.checkpointer.snapshot(
                barrier, states, offsets, alignment_ms, delay, deferred, background, time.monotonic() - snapshots_s
            )
        if barrier.is_sync_savepoint:
            # Nothing may follow this barrier until the savepoint's outcome is known: a source stops
            # reading, and no task fires processing-time timers (see _flush_due).
            self._savepoint_stop = barrier

    def _incremental_ok(self, barrier: Barrier) -> bool:
        """Checkpoints in the job's checkpoint directory may share files; a savepoint is always whole.
        At a URL too."""
        return barrier.checkpoint_type == "CHECKPOINT" and barrier.location is not None

    def _shared_file_writer(
        self, op_id: str, barrier: Barrier, uploads: Uploads | None = None
    ) -> Callable[[str, list[tuple[int, bytes]]], SharedFile]:
        """Writes a file of this subtask's chain in the job's shared directory, with its index in it
        (``SharedFile.footer``), so the checkpoint's state file lists the chain without them. At a URL
        the upload goes to ``uploads``, which the snapshot waits for (``_counting_shared_bytes``)."""
        cid = barrier.checkpoint_id
        shared_dir = shared_dir_of_checkpoint(barrier.location)  # type: ignore[arg-type]
        safe = re.sub(r"[^0-9A-Za-z_-]", "_", f"{op_id}-{self.tdd.vertex_id}-{self.tdd.subtask}-{self.tdd.attempt}")
        # unique: a retried checkpoint id never overwrites (drawn here: a forked child must not share the parent's)
        suffix = uuid.uuid4().hex[:8]

        written = itertools.count()  # a checkpoint may write two files of a kind (a merged delta and its own)

        def write_file(kind: str, parts: list[tuple[int, bytes]]) -> SharedFile:
            n = next(written)
            name = f"{safe}-{cid}-{suffix}{f'-{n}' if n else ''}.{kind}"
            size, index = write_shared_file(
                shared_dir, name, parts, self.tdd.job_id, (FOOTER, encode_index), None if uploads is None else uploads.submit
            )
            return written_file(name, kind, size, index)

        return write_file

    def _shared_file_reader(self, barrier: Barrier) -> Callable[[str, list[tuple[int, int, int]]], list[tuple[int, bytes]]]:
        """Reads the parts of a file in this job's shared directory (a chain a compaction rebuilds)."""
        shared_dir = shared_dir_of_checkpoint(barrier.location)  # type: ignore[arg-type]

        def read_file(name: str, index: list[tuple[int, int, int]]) -> list[tuple[int, bytes]]:
            return read_shared_file(shared_dir, name, index, self.tdd.job_id)

        return read_file

    def _heap_incremental_snapshot(self, op: StreamOperator, op_id: str, barrier: Barrier) -> Callable[[], dict[str, Any]]:
        cid = barrier.checkpoint_id
        uploads = self._uploads(barrier)
        # No base is forked where one is due (after an aborted checkpoint, or a cleared table): a delta
        # of every key on the writer thread instead, merged into a base there. A fork of a slot that
        # holds millions of keys paused the task 35-70 ms and its child pickled every key; the delta
        # of every key costs the writer what a rebase does (docs/large-state.md, change 31). At a URL
        # a forked child must not open connections to a store anyway.
        finish = snapshot_heap_incremental(
            self.keyed_backend, op, cid, self._shared_file_writer(op_id, barrier, uploads), self._shared_file_reader(barrier),
            whole=getattr(self.keyed_backend, "whole", False),
        )
        return self._counting_shared_bytes(cid, finish, "heap_chain", uploads)

    def _incremental_snapshot(self, op: StreamOperator, op_id: str, barrier: Barrier) -> Callable[[], dict[str, Any]]:
        cid = barrier.checkpoint_id
        uploads = self._uploads(barrier)
        finish = snapshot_keyed_incremental(
            self.keyed_backend, op, cid, self._shared_file_writer(op_id, barrier, uploads), self._shared_file_reader(barrier)
        )
        return self._counting_shared_bytes(cid, finish, "chain", uploads)

    def _uploads(self, barrier: Barrier) -> Uploads | None:
        """A snapshot's uploads at a URL, several at a time (``TRANSFER_THREADS``); None locally."""
        if not is_remote(barrier.location or ""):
            return None
        return Uploads(transfer_threads(self.tdd.config, [barrier.location]))

    def _counting_shared_bytes(
        self, cid: int, finish: Callable[[], dict[str, Any]], field: str, uploads: Uploads | None = None
    ) -> Callable[[], dict[str, Any]]:
        """``finish`` (an incremental snapshot, on the writer thread), telling the checkpointer the bytes
        of the new shared file and of the whole chain in ``field`` of its result; it returns once its
        ``uploads`` have all landed (and raises if one failed)."""

        def complete() -> dict[str, Any]:
            try:
                out = finish()
            except BaseException:
                if uploads is not None:
                    with contextlib.suppress(Exception):
                        uploads.wait()  # none may land once the checkpoint was declined; finish's error is the one said
                raise
            if uploads is not None:
                uploads.wait()
            written = out.pop("_written", None)  # a compaction wrote a base too
            if self.checkpointer is not None:
                new, whole = chain_sizes(out[field])
                self.checkpointer.shared_bytes[cid] = (new if written is None else written, whole)
            return out

        return complete

    def _on_latency_marker(self, marker: LatencyMarker) -> None:
        """Record the marker for every operator of the chain, then send it on, past any user function."""
        if self._savepoint_stop is not None:
            return  # nothing follows a stop-with-savepoint's barrier until its outcome is known
        if self.latency is not None and self.latency.operator_ids:
            self.latency.report(marker, int(time.time() * 1000))
        wire = marker.to_wire()
        for w in self.writers:
            w.emit_latency_marker(wire)

    def _apply_alignment(self, step: AlignmentStep, gate: Any) -> None:
        """Carry out what the aligner decided: block, snapshot with the barrier it owns, unblock."""
        for c in step.block:
            gate.block(c)
        if step.abandoned is not None:
            self._decline(step.abandoned, "a newer checkpoint's barrier arrived before its alignment completed")
        if step.ready is not None:
            started = step.started if step.started is not None else time.monotonic()
            self._take_checkpoint(step.ready, int((time.monotonic() - started) * 1000))
        for c in step.unblock:
            gate.unblock(c)

    def _restore(self) -> None:
        """Load this subtask's share of a checkpoint, possibly taken at another parallelism: keyed state
        and timers by key group, operator state, CheckpointedFunction state, a source's splits."""
        plan = TaskRestore.from_dict(self.tdd.restore)
        self.restored_checkpoint_id = plan.checkpoint_id
        origin = plan.origin  # every file read is checked against the checkpoint that wrote it

        def read_head(handle: Any) -> Any:  # a peer's state without its keyed parts (its union list state)
            return _read_state(handle, origin, range(0))

        def read_peer(handle: Any) -> Any:
            return _read_state(handle, origin)

        head = self.tdd.operators[0]
        for node_id in self.tdd.operators:
            spec = plan.operators.get(self.graph.nodes[node_id].operator_id)
            if spec is None:
                continue
            # only the key groups this subtask owns: the other parts of a key-grouped file are not read;
            # the on-disk backend's records go straight into it, part by part
            streamed = node_id == head and hasattr(self.keyed_backend, "restore_records")
            loaded = {
                old: _read_state_into(handle, origin, spec.key_groups, self.keyed_backend)
                if streamed
                else _read_state(handle, origin, spec.key_groups)
                for old, handle in spec.handles.items()
            }
            self.restored_functions[node_id] = restore_function_state(loaded, spec, read_head)
            op = self.operators.get(node_id)
            if op is None:  # the source: resume its splits
                self.restored_position = restore_splits(loaded, spec, self.graph.transformations[node_id].function)
                continue
            if node_id == head and self.keyed_backend is not None:
                handles = spec.handles

                def read_shared(old: int, name: str, ranges: list[tuple[int, int, int]]) -> Iterator[tuple[int, bytes]]:
                    return iter_shared_parts(handles[old], name, ranges, origin)  # read as the replay draws

                own = handles.get(self.tdd.subtask)
                # <dir>/<job>/chk-<n>/<file>: a delta may only extend a chain in this job's shared/ directory,
                # sealed as this release seals (a compaction reads the chain's files as its own job's)
                same_job = (
                    isinstance(own, str)
                    and os.path.basename(os.path.dirname(os.path.dirname(own))) == self.tdd.job_id
                    and origin.job_id == self.tdd.job_id
                    and not origin.legacy
                )
                restore_keyed(
                    self.keyed_backend, op, loaded, spec, read_peer=read_peer, read_shared=read_shared, may_resume=same_job,
                    transfer_threads=transfer_threads(self.tdd.config, handles.values()),
                )
            op.restore_state(restore_operator_state(loaded, spec))

    def _initialize_functions(self) -> None:
        """CheckpointedFunction.initialize_state, once, after open and restore, before any record."""
        for node_id, handler in self.function_states.items():
            handler.initialize(self.restored_functions.get(node_id), self.restored_checkpoint_id)

    def _drain_notifications(self) -> list[int]:
        """Hand checkpoint outcomes to the operators; returns the aborted checkpoint ids."""
        while self.completed_notifications:
            cid = self.completed_notifications.popleft()
            for op in self.operators.values():
                op.notify_checkpoint_complete(cid)
            for handler in self.function_states.values():
                handler.notify_checkpoint_complete(cid)
            confirm = getattr(self.keyed_backend, "notify_checkpoint_complete", None)
            if confirm is not None:  # an incremental backend's next delta rests on this checkpoint
                confirm(cid)
            notify = getattr(self.reader, "notify_checkpoint_complete", None)
            if notify is not None:
                notify(cid)
            if self._savepoint_stop is not None and cid >= self._savepoint_stop.checkpoint_id:
                self._stopping = True
        aborted: list[int] = []
        while self.aborted_notifications:
            cid = self.aborted_notifications.popleft()
            aborted.append(cid)
            for op in self.operators.values():
                op.notify_checkpoint_aborted(cid)
            for handler in self.function_states.values():
                handler.notify_checkpoint_aborted(cid)
            aborted_backend = getattr(self.keyed_backend, "notify_checkpoint_aborted", None)
            if aborted_backend is not None:  # an incremental backend's next snapshot is then a base
                aborted_backend(cid)
            notify = getattr(self.reader, "notify_checkpoint_aborted", None)
            if notify is not None:
                notify(cid)
            if self._savepoint_stop is not None and cid == self._savepoint_stop.checkpoint_id and not self._stopping:
                self._savepoint_stop = None  # the stop failed: the job goes on as before
        return aborted

    @property
    def _drain(self) -> bool:
        """Whether the task ends event time at its end: always, unless stopped with a savepoint without drain."""
        return not self._stopping or self._savepoint_stop is None or self._savepoint_stop.drain

    def _await_savepoint_outcome(self) -> None:
        """A task whose inputs ended after it snapshotted a stop-with-savepoint waits for the savepoint
        to complete before it finishes, so a two-phase-commit sink commits the savepoint's output first."""
        cancelled = self.env.cancelled
        while self._savepoint_stop is not None and not self._stopping:
            if cancelled.is_set():
                raise TaskCancelled()
            self._drain_notifications()
            self._flush_due()
            time.sleep(0.005)

    # -- wiring ------------------------------------------------------------
    def _build(self) -> None:
        chain = build_operator_chain(
            self.tdd, self.graph, self.env, self.name, self.metrics, self.serializer,
            self.buffer_records, self.buffer_timeout_ms,
        )
        self.keyed_backend = chain.keyed_backend
        self.operators = chain.operators
        self.function_states = chain.function_states
        self.writers = chain.writers
        self.outputs = chain.outputs
        self.custom_partitions = chain.custom_partitions
        self.ticking = [op for op in self.operators.values() if op.wants_ticks]
        self.next_tick = 0.0
        # Operators with work finishing on other threads (async I/O) hand it over in _flush_due.
        self.mailboxes = [op for op in self.operators.values() if hasattr(op, "process_mail")]
        for op in self.mailboxes:
            op.cancelled = self.env.cancelled  # their blocked waits (capacity, end of input) end with the task

    # -- running -----------------------------------------------------------
    def run(self) -> None:
        """Run to completion. Raises TaskCancelled when cancelled, or the user's exception."""
        activate_user_code(self.graph)  # class names in records and state resolve to this job's classes
        opened: list[StreamOperator] = []
        opened_partitions: list[Any] = []
        try:
            if self.checkpointer is not None and self.tdd.periodic_checkpoints:
                self.checkpointer.prestart()  # closed with the task, in the finally below
            self._build()
            for node_id in self.tdd.operators:
                op = self.operators.get(node_id)
                if op is not None:
                    op.open()
                    opened.append(op)
            for custom, ctx in self.custom_partitions:  # partition_custom's Partitioner and KeySelector
                custom.open(StreamingRuntimeContext(ctx))
                opened_partitions.append(custom)
            if self.tdd.restore:
                self._restore()
            self._initialize_functions()
            for op in opened:
                op.initialized()
            head = self.graph.transformations[self.tdd.operators[0]]
            if head.kind is OperatorKind.SOURCE:
                self._run_source(head)
            else:
                self._run_input()
                self._await_savepoint_outcome()
            drain = self._drain
            for node_id in self.tdd.operators:
                op = self.operators.get(node_id)
                if op is not None:
                    if drain:
                        op.end_input()
                    else:
                        op.stop_without_drain()
            for w in self.writers:
                w.broadcast_event(END_OF_PARTITION)
            for w in self.writers:
                w.close()  # everything sent has reached the channels before the task reports FINISHED
        finally:
            for op in [*opened, *opened_partitions]:
                try:
                    op.close()
                except Exception:
                    pass
            if self.checkpointer is not None:
                self.checkpointer.close()
            close = getattr(self.keyed_backend, "close", None)
            if close is not None:
                close()
            release = getattr(self.env.channels, "close", None)
            if release is not None:
                release()  # the task's Redis connections go back to the pool, however it ended

    def _flush_due(self) -> float:
        now = time.monotonic()
        if self.ticking and now >= self.next_tick and self._savepoint_stop is None:
            # Processing-time timers and idleness checks run between batches, on this thread.
            self.next_tick = now + TICK_S
            now_ms = int(time.time() * 1000)
            for op in self.ticking:
                op.on_tick(now_ms)
        nxt = TICK_S if self.ticking else float("inf")
        if self.mailboxes and self._savepoint_stop is None:
            for op in self.mailboxes:  # nothing leaves after a stop-with-savepoint's barrier
                nxt = min(nxt, op.process_mail())
        for w in self.writers:
            nxt = min(nxt, w.flush_due(now))
        return nxt

    def _run_source(self, t: Any) -> None:
        tdd = self.tdd
        reader = self.reader = t.function.create_reader(tdd.subtask, tdd.parallelism, self.restored_position)
        initialize = getattr(reader, "initialize_function_state", None)
        if initialize is not None:
            initialize(self.restored_functions.get(t.id), self.restored_checkpoint_id)
        out = self.outputs[t.id]
        if self.restored_position == [] and not t.bounded:
            # Restored with no splits (more subtasks than splits after a rescale): this subtask will
            # never emit, so it must not hold back event time downstream.
            out.emit_status(True)
        cancelled = self.env.cancelled
        metrics = self.metrics
        triggers = self.triggers
        markers: MarkerSchedule | None = None
        if self.latency_interval_ms > 0:
            head_id = self.graph.nodes[t.id].operator_id
            markers = MarkerSchedule(self.latency_interval_ms, head_id, tdd.subtask, int(time.time() * 1000))
        due = self._flush_due()
        hinted = hasattr(reader, "max_idle_s")  # SourceReader's; a user's reader of its own may have none
        try:
            while True:
                if markers is not None:  # latency tracking off: this test is all it costs per batch
                    marker = markers.due(int(time.time() * 1000))
                    if marker is not None:
                        self._on_latency_marker(marker)
                        due = self._flush_due()  # the marker's buffer may be due sooner
                if cancelled.is_set():
                    raise TaskCancelled()
                while triggers:
                    self._take_checkpoint(triggers.popleft(), 0)
                if self.completed_notifications or self.aborted_notifications:
                    self._drain_notifications()
                if self._savepoint_stop is not None:
                    if self._stopping:
                        break
                    # Stop-with-savepoint: read nothing more until the savepoint completes or aborts.
                    t0 = time.monotonic()
                    self._flush_due()
                    time.sleep(0.005)
                    metrics.idle_s += time.monotonic() - t0
                    continue
                t0 = time.monotonic()
                if hinted:
                    reader.max_idle_s = due  # an idle reader wakes for the next flush (SourceReader)
                batch = reader.poll_batch(SOURCE_BATCH)
                if batch is None:
                    break
                if not batch:
                    metrics.idle_s += time.monotonic() - t0
                    due = self._flush_due()
                    continue
                out.emit(batch, None)
                due = self._flush_due()
            while triggers:  # came with the last batch: the source is at its final, consistent point
                self._take_checkpoint(triggers.popleft(), 0)
            # A bounded source, or a stop with drain, ends event time: every window and timer
            # downstream may fire. A stop without drain leaves them pending in the savepoint.
            if self._drain:
                out.emit_watermark(MAX_WATERMARK)
        finally:
            self._close_triggers()
            reader.close()

    def _run_input(self) -> None:
        tdd = self.tdd
        cids: list[ChannelId] = []
        input_of: list[int] = []  # channel -> logical input (0, or 1 for a two-input operator)
        for spec in tdd.inputs:
            for src in spec.sources:
                cids.append(ChannelId(tdd.job_id, spec.edge, src, tdd.subtask, tdd.attempt))
                input_of.append(spec.input_index)
        gate = self.env.channels.gate(cids)
        head = self.operators[tdd.operators[0]]
        open_channels = set(range(len(cids)))
        decode = self.serializer.decode
        metrics = self.metrics
        valve = StatusWatermarkValve(len(cids))
        idle_downstream = False
        aligner = BarrierAligner(self.exactly_once)
        slicer = BatchSlicer()
        try:
            while open_channels:
                due = self._flush_due()
                t0 = time.monotonic()
                item = gate.poll(min(due, 0.1))
                metrics.idle_s += time.monotonic() - t0
                if self.completed_notifications or self.aborted_notifications:
                    for cid in self._drain_notifications():
                        for c in aligner.abort(cid):
                            gate.unblock(c)
                if item is None:
                    continue
                ch, payload = item
                metrics.bytes_in = gate.bytes_received
                kind, a, b = decode(payload)
                advanced: int | None = None
                if kind == RECORDS:
                    process = head.process_batch if input_of[ch] == 0 else head.process_batch2
                    n = len(a)
                    step = slicer.slice_size(n)
                    for i in range(0, n, step):
                        # Counted as processed, slice by slice: a slow operator's rates do not flap.
                        values = a if step >= n else a[i : i + step]
                        t1 = time.monotonic()
                        process(values, b if b is None or step >= n else b[i : i + step])
                        slicer.took(len(values), time.monotonic() - t1)
                        metrics.records_in += len(values)
                    gate.ack(ch)
                elif kind == WATERMARK:
                    advanced = valve.input_watermark(ch, a)
                elif kind == STATUS:
                    advanced = valve.input_idle(ch, bool(a))
                elif kind == BARRIER:
                    step = aligner.on_barrier(ch, Barrier.from_wire(a), open_channels, time.monotonic())
                    self._apply_alignment(step, gate)
                elif kind == LATENCY_MARKER:
                    self._on_latency_marker(LatencyMarker.from_wire(a))
                elif kind == END_OF_PARTITION:
                    open_channels.discard(ch)
                    gate.block(ch)
                    advanced = valve.end_of_partition(ch)
                    if self._savepoint_stop is not None and not self._savepoint_stop.drain:
                        # Stopped without drain: an ended input keeps holding event time back (as in
                        # Flink), so no window or timer fires that the savepoint still holds pending.
                        advanced = None
                    self._apply_alignment(aligner.on_end_of_partition(open_channels), gate)
                if advanced is not None:
                    metrics.current_input_watermark = advanced
                    head.process_watermark(advanced)
                if valve.all_idle() != idle_downstream and open_channels:
                    idle_downstream = not idle_downstream
                    head.process_status(idle_downstream)
        finally:
            gate.close()
