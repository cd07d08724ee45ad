"""Sink operators: print, user SinkFunctions, Sink writers and execute_and_collect's collector."""
from __future__ import annotations

from collections import deque
from typing import Any

from millstream.engine.common.type_formatting import record_formatter
from millstream.engine.datastream.functions import SinkFunction
from millstream.engine.runtime import collect
from millstream.engine.runtime.collect import MAX_KEPT_BYTES
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from millstream.engine.runtime.operators.base import StreamOperator


class PrintSinkOperator(StreamOperator):
    """Flink's print(): prefixes ``<subtask+1>> `` when parallel, ``id:`` with an identifier.

    Each record is written in the form PyFlink prints for the stream's declared type
    (``params["type_info"]``, see engine/common/type_formatting.py); untyped records with ``str``.
    """

    #: the parallelism the prefix shows, when not the task's: a small BATCH job's print sink runs as one
    #: subtask in Flink (set by the operator chain, see engine/graph/forward_groups.py)
    print_parallelism: int | None = None

    def open(self) -> None:
        super().open()
        ident = self.params.get("identifier")
        if (self.print_parallelism or self.ctx.parallelism) > 1:
            self.prefix = f"{ident}:{self.ctx.subtask + 1}> " if ident else f"{self.ctx.subtask + 1}> "
        else:
            self.prefix = f"{ident}> " if ident else ""
        self.format = record_formatter(self.params.get("type_info"))

    def process_batch(self, values, timestamps):
        p, fmt = self.prefix, self.format
        try:
            text = "\n".join(f"{p}{fmt(v)}" for v in values)
        except (TypeError, ValueError, AttributeError) as e:
            declared = self.params.get("type_info")
            raise TypeError(f"print(): a record does not fit the stream's declared type {declared!r}: {e}") from e
        self.ctx.print_line(text)


class _SinkContext:
    def __init__(self) -> None:
        self.ts: int | None = None

    def timestamp(self) -> int | None:
        return self.ts


class FunctionSinkOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        f = self.function
        self.sctx = _SinkContext()
        self.fn = (lambda v: f.invoke(v, self.sctx)) if isinstance(f, SinkFunction) else f

    def process_batch(self, values, timestamps):
        fn = self.fn
        for i, v in enumerate(values):
            if timestamps is not None:
                self.sctx.ts = timestamps[i]
            fn(v)


class WriterSinkOperator(StreamOperator):
    """``sink_to``: runs a Sink's writer, and for a two-phase-commit sink Flink's commit protocol.

    Before checkpoint n's barrier passes, the writer's committables are staged under n;
    the operator state (a plain list, so it can be split on rescale) holds every staged
    committable and the writer's own state. ``notify_checkpoint_complete(n)`` commits
    what is staged under ids <= n (a checkpoint that was aborted is covered by the next
    one, whose state also holds its committables); a restore commits every committable
    it finds again, since the failure may have struck between completion and
    notification; end of input commits the rest.
    """

    def open(self) -> None:
        super().open()
        self.sink = self.function
        self.committer = self.sink.create_committer()
        self.staged: dict[int, list[Any]] = {}  # checkpoint id -> committables not yet committed
        self.snapshot_id: int | None = None
        self.writer: Any = None

    def _create_writer(self, recovered: list[Any], restored: bool) -> Any:
        from millstream.engine.datastream.connectors.sink import InitContext

        c = self.ctx
        context = InitContext(
            subtask=c.subtask,
            parallelism=c.parallelism,
            attempt=c.attempt,
            job_id=c.job_id,
            operator_id=str(self.params.get("node_id")),
            restored=restored,
            restarts_finished_tasks=True,
        )
        self.writer = self.sink.restore_writer(context, recovered)
        return self.writer

    def process_batch(self, values, timestamps):
        w = self.writer if self.writer is not None else self._create_writer([], False)
        for v in values:
            w.write(v)

    def _commit(self, committables: list[Any]) -> None:
        if not committables:
            return
        if self.committer is None:
            raise TypeError(f"sink '{self.ctx.operator_name}' staged committables but has no Committer")
        self.committer.commit(committables)

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        w = self.writer if self.writer is not None else self._create_writer([], False)
        w.flush(False)
        staged = w.prepare_commit()
        if staged:
            self.staged.setdefault(checkpoint_id, []).extend(staged)
        self.snapshot_id = checkpoint_id

    def snapshot_state(self) -> Any:
        if self.snapshot_id is None:
            raise RuntimeError(f"sink '{self.ctx.operator_name}' was snapshotted without prepare_snapshot_pre_barrier")
        cid, self.snapshot_id = self.snapshot_id, None
        items: list[Any] = [["committable", c, x] for c in sorted(self.staged) for x in self.staged[c]]
        items.extend(["writer", s] for s in self.writer.snapshot_state(cid))
        return items

    def restore_state(self, state: Any) -> None:
        committables: list[tuple[int, Any]] = []
        writer_states: list[Any] = []
        for item in state or []:
            if isinstance(item, (list, tuple)) and len(item) == 3 and item[0] == "committable":
                committables.append((int(item[1]), item[2]))
            elif isinstance(item, (list, tuple)) and len(item) == 2 and item[0] == "writer":
                writer_states.append(item[1])
            else:
                raise ValueError(f"sink '{self.ctx.operator_name}' cannot restore state item {item!r}")
        committables.sort(key=lambda t: t[0])
        self._commit([x for _, x in committables])
        if self.writer is not None:
            self.writer.close()
        self._create_writer(writer_states, True)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        for cid in sorted(c for c in self.staged if c <= checkpoint_id):
            self._commit(self.staged.pop(cid))
        if self.writer is not None:
            self.writer.notify_checkpoint_complete(checkpoint_id)

    def end_input(self) -> None:
        w = self.writer if self.writer is not None else self._create_writer([], False)
        w.flush(True)
        rest = w.prepare_commit()
        for cid in sorted(self.staged):
            self._commit(self.staged.pop(cid))
        self._commit(rest)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.committer is not None:
            self.committer.close()
        super().close()


class CollectSinkOperator(StreamOperator):
    """``execute_and_collect``'s sink (Flink's CollectSinkOperator; it runs at parallelism 1).

    Records get consecutive positions and go to the client at once, tagged with the attempt. With
    exactly-once checkpoints they are *gated*: the client holds them until this sink publishes a
    COMMIT for the position its latest completed checkpoint covered (the position is snapshotted, so
    a restored attempt starts from it and tells the client so). See engine/runtime/collect.py.

    When the gateway can lose entries (Redis), the sink also keeps every record its client has not
    acknowledged, encoded, in its checkpointed state, as Flink's CollectSinkFunction keeps its
    buffer: a restored attempt writes them again before anything new, so records a completed
    checkpoint covers survive a Redis restart however far behind the client is. The kept records
    are bounded (``max_kept_bytes``): when full, the sink waits for the client (backpressure)
    instead of dropping any.
    """

    #: encoded bytes of unacknowledged records a sink keeps before it waits for its client
    max_kept_bytes = MAX_KEPT_BYTES

    def open(self) -> None:
        super().open()
        gateway = self.ctx.collect
        if gateway is None:
            raise RuntimeError("this task environment cannot collect results")
        self.gateway = gateway
        self.gated = gateway.gated
        self.replays = bool(getattr(gateway, "replays", False))
        self.serializer = MsgpackSerializer()
        self.seq = 0  # position of the next record
        # (position, count, encoded values) the client has not acknowledged, oldest first
        self.kept: deque[tuple[int, int, bytes]] = deque()
        self.kept_bytes = 0
        self.checkpoint_seqs: dict[int, int] = {}  # checkpoint id -> position it covers
        self.started = False

    def initialized(self) -> None:
        # As the task starts, not at its first barrier: publishing START there put a Redis write into
        # that checkpoint's synchronous part (its slowest pause at 3 M keys, behind busy threads).
        if not self.started:
            self._start()

    def _start(self) -> None:
        # Not in open(): restore_state comes after it and sets the position this attempt starts at.
        self.started = True
        if self.ctx.attempt == 0:
            # A new job restored from a savepoint: what the old job's sink kept belonged to the old
            # job's client. This job's client starts at the savepoint's position.
            self._forget(self.seq)
        origin = self.kept[0][0] if self.kept else self.seq
        entries = [collect.start(self.ctx.attempt, self.seq, self.gated, origin)]
        entries += [collect.records(self.ctx.attempt, pos, (), body) for pos, _, body in self.kept]
        self.gateway.publish(entries)

    def process_batch(self, values, timestamps):
        if not self.started:
            self._start()
        step = collect.MAX_RECORDS_PER_ENTRY
        for i in range(0, len(values), step):
            chunk = list(values[i : i + step])
            body = collect.encode_values(self.serializer, chunk)
            if self.replays:
                self._make_room()
                self.kept.append((self.seq, len(chunk), body))
                self.kept_bytes += len(body)
            self.gateway.publish([collect.records(self.ctx.attempt, self.seq, chunk, body)])
            self.seq += len(chunk)

    def _make_room(self) -> None:
        """While the sink keeps ``max_kept_bytes`` or more, wait until the client acknowledged enough
        of the oldest kept records to bring it below (so it keeps at most one entry more)."""
        if self.kept_bytes < self.max_kept_bytes:
            return
        remaining, upto = self.kept_bytes, self.kept[0][0]
        for pos, count, body in self.kept:
            if remaining < self.max_kept_bytes:
                break
            remaining -= len(body)
            upto = pos + count
        self._forget(self.gateway.await_acknowledged(self.ctx.attempt, upto))

    def _forget(self, position: int) -> None:
        """Drop kept records before ``position`` (the client holds them)."""
        kept = self.kept
        while kept and kept[0][0] + kept[0][1] <= position:
            self.kept_bytes -= len(kept.popleft()[2])

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        if not self.started:
            self._start()
        self.checkpoint_seqs[checkpoint_id] = self.seq
        # No wait for the client here, nor a look at what it acknowledged (a Redis round trip in the
        # checkpoint's synchronous part, 45 ms behind busy threads at 3 M keys): the records this
        # checkpoint covers that it has not acknowledged are in the snapshot (``kept``), with perhaps
        # some it has, and a restored attempt writes them again (the client takes each position
        # once), so a Redis restart after the checkpoint loses none of them however slow the client
        # is. What the client holds is forgotten once a checkpoint completes.

    def snapshot_state(self) -> Any:
        # Tuples of ints and immutable bytes: the list copy is the snapshot's own.
        return {"seq": self.seq, "kept": list(self.kept)}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.seq = int(state["seq"])
            self.kept = deque((int(p), int(n), bytes(b)) for p, n, b in state.get("kept", ()))
            self.kept_bytes = sum(len(b) for _, _, b in self.kept)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        done = [c for c in self.checkpoint_seqs if c <= checkpoint_id]
        if not done:
            return
        upto = max(self.checkpoint_seqs.pop(c) for c in done)
        if self.gated:
            self.gateway.publish([collect.commit(self.ctx.attempt, upto)])
        if self.replays and self.kept:
            self._forget(self.gateway.acknowledged(self.ctx.attempt))

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.checkpoint_seqs.pop(checkpoint_id, None)  # a later checkpoint covers its records

    def end_input(self) -> None:
        if not self.started:
            self._start()
        self.gateway.publish([collect.end(self.ctx.attempt, self.seq)])

    def stop_without_drain(self) -> None:
        # Stopped with a savepoint: it completed before the task ends, so everything is final.
        self.end_input()
