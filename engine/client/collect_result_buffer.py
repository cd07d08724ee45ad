"""The client's side of ``execute_and_collect``: which collected records the user may see, and when.

Flink's CheckpointedCollectResultBuffer and UncheckpointedCollectResultBuffer in one class, fed the
entries described in engine/runtime/collect.py in the order the sink wrote them:

- a gated attempt's records wait here until a COMMIT (or the START of a newer attempt restored past
  them, or the job's end) makes them final, so with exactly-once checkpoints the user sees every
  record once even across failovers; records of a gated attempt at positions the user was already
  given are skipped (a restore to an older position, a failure after the input ended);
- an ungated attempt's records are final at once (no checkpointing, or at-least-once checkpoints):
  after a failover the new attempt's records from its restored position come again;
- entries of an attempt other than the current one (a failed attempt still writing) are ignored.

Pure bookkeeping, no I/O.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Iterator

from engine.runtime.collect import COMMIT, RECORDS, START, CollectEntry


class CollectResultBuffer:
    def __init__(self) -> None:
        self.attempt = -1
        self.gated = False
        self.delivered = 0  # positions handed to the user (gated attempts), for skipping replays
        self._pending: deque[tuple[int, Any]] = deque()  # (position, record) not final yet

    @property
    def pending(self) -> int:
        return len(self._pending)

    def add(self, entries: Iterable[CollectEntry]) -> Iterator[Any]:
        """The records these entries make final, in order."""
        for e in entries:
            if e.attempt < self.attempt or (e.kind != START and e.attempt != self.attempt):
                continue  # a failed attempt still writing, or one whose START this client never saw
            if e.kind == START:
                # The new attempt restored a completed checkpoint covering positions before e.seq:
                # those are final, whatever the failed attempt wrote past them is not.
                yield from self._release(e.seq)
                self._pending.clear()
                self.attempt, self.gated = e.attempt, e.gated
            elif e.kind == RECORDS:
                if self.gated:
                    self._pending.extend(zip(range(e.seq, e.seq + len(e.values)), e.values))
                else:
                    yield from e.values
            elif e.kind == COMMIT:
                yield from self._release(e.seq)

    def finish(self) -> Iterator[Any]:
        """The job FINISHED: what its last attempt wrote is final (as in Flink, a finished job's
        results count as checkpointed)."""
        yield from self._release(None)

    def _release(self, upto: int | None) -> Iterator[Any]:
        pending = self._pending
        while pending and (upto is None or pending[0][0] < upto):
            seq, value = pending.popleft()
            if seq < self.delivered:
                continue  # the user has this position already
            self.delivered = seq + 1
            yield value
