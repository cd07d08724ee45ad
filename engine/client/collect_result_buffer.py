"""The client's side of ``execute_and_collect``: which collected records the user may see, and when.

Flink's CheckpointedCollectResultBuffer and UncheckpointedCollectResultBuffer in one class, fed the
entries described in engine/runtime/collect.py in the order the sink wrote them:

- a gated attempt's records wait here until a COMMIT (or the START of a newer attempt restored past
  them, or the END of the input) makes them final, so with exactly-once checkpoints the user sees
  every record once even across failovers; records at positions the user was already given are
  skipped (a restore to an older position, a failure after the input ended);
- an ungated attempt's records are final at once (no checkpointing, or at-least-once checkpoints):
  after a failover the new attempt's records from its restored position come again;
- a restored attempt first writes again the records its checkpoint kept for this client (from its
  START's ``origin``), so the records a Redis restart lost arrive all the same; those the client
  holds already are skipped;
- entries of an attempt older than the current one (a failed attempt still writing) are ignored.

Records are handed out strictly in position order. Entries that went missing (deleted from Redis,
or a START, COMMIT or END that never came) are found, not skipped: an attempt's RECORDS must follow
each other without a gap from its origin, a newer attempt must begin with its START, and a
finished job must have ended its input; otherwise ``ResultsMissing`` names what is missing.
``ack()`` is what the client tells the sink it holds. Pure bookkeeping, no I/O.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

from millstream.engine.runtime.collect import COMMIT, END, RECORDS, START, Ack, CollectEntry


class ResultsMissing(RuntimeError):
    """Collected results went missing between the sink and the client; the collect cannot go on exactly."""


class CollectResultBuffer:
    def __init__(self) -> None:
        self.attempt = -1
        self.gated = False
        self.delivered = 0  # the next position to hand to the user
        self.final = 0  # positions before it are final
        self.expect = 0  # the position the current attempt's next RECORDS must start at
        self.ended = False  # the current attempt's END arrived
        self._pending: dict[int, Any] = {}  # position -> record held, not handed out yet
        self._held = 0  # a position before which every record is held (see held())

    @property
    def pending(self) -> int:
        return len(self._pending)

    def held(self) -> int:
        """The position before which this client holds every record (handed out or pending)."""
        p = max(self._held, self.delivered)  # extended from where the last call stopped: amortised O(1)
        while p in self._pending:
            p += 1
        self._held = p
        return p

    def ack(self) -> Ack | None:
        """What the current attempt's sink may forget (None before the first START)."""
        return Ack(self.attempt, self.held()) if self.attempt >= 0 else None

    def add(self, entries: Iterable[CollectEntry]) -> Iterator[Any]:
        """The records these entries make final, in order. Raises ResultsMissing on a gap."""
        for e in entries:
            if e.attempt < self.attempt:
                continue  # a failed attempt still writing
            if e.kind == START:
                if e.attempt == self.attempt:
                    raise ResultsMissing(f"attempt {e.attempt} of the collect sink started twice")
                self._start(e)
            elif e.attempt > self.attempt:
                if self.attempt < 0:
                    continue  # written before the first START this client reads (a lost list's stale writer)
                raise ResultsMissing(
                    f"results of attempt {e.attempt} arrived without its start: result entries went missing"
                )
            elif e.kind == RECORDS:
                self._records(e)
            elif e.kind in (COMMIT, END):
                if e.seq > self.expect:
                    raise ResultsMissing(
                        f"positions {self.expect} to {e.seq - 1} of the results were committed but never "
                        "arrived: result entries went missing"
                    )
                self.final = max(self.final, e.seq)
                self.ended = self.ended or e.kind == END
            yield from self._release()

    def _start(self, e: CollectEntry) -> None:
        first = e.first
        if self.attempt < 0:
            # What came before ``first`` belongs to the job a savepoint came from; before ``e.seq``
            # is final (restored), as below.
            self.delivered, self.final = first, e.seq
        else:
            # The restored checkpoint covered every position before e.seq: whatever the failed
            # attempt wrote from there is not final and comes again; what before it the client
            # lacks, the new attempt writes again from ``first``.
            for p in [p for p in self._pending if p >= e.seq]:
                del self._pending[p]
            if not e.gated and self.delivered > e.seq:
                self.delivered = e.seq  # at-least-once: these records come again, as Flink's client gets them
            self._held = min(self._held, e.seq)
            if first > self.held():
                raise ResultsMissing(
                    f"positions {self.held()} to {first - 1} of the results are lost: the restored collect "
                    f"sink of attempt {e.attempt} no longer holds them"
                )
            self.final = max(self.final, e.seq)
        self.attempt, self.gated, self.expect, self.ended = e.attempt, e.gated, first, False

    def _records(self, e: CollectEntry) -> None:
        if e.seq != self.expect:
            raise ResultsMissing(
                f"positions {self.expect} to {e.seq - 1} of the results never arrived: result entries went missing"
                if e.seq > self.expect
                else f"result positions from {e.seq} arrived twice in attempt {e.attempt}"
            )
        pending, delivered = self._pending, self.delivered
        for p, v in enumerate(e.values, e.seq):
            if p >= delivered and p not in pending:
                pending[p] = v
        self.expect = e.seq + len(e.values)
        if not self.gated:
            self.final = max(self.final, self.expect)

    def finish(self) -> Iterator[Any]:
        """The job FINISHED: its last attempt must have ended its input, and every record before that
        end must have arrived (as in Flink, a finished job's results count as checkpointed)."""
        if not self.ended:
            raise ResultsMissing("the job finished but the end of its results never arrived: result entries went missing")
        yield from self._release()
        if self.delivered < self.final:
            raise ResultsMissing(f"positions from {self.delivered} to {self.final - 1} of the results never arrived")

    def _release(self) -> Iterator[Any]:
        pending = self._pending
        while self.delivered < self.final and self.delivered in pending:
            yield pending.pop(self.delivered)
            self.delivered += 1
