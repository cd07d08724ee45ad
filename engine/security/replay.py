"""Replay windows: a sealed control message copied and pushed again into its inbox is accepted once.

The MAC (engine/security/mac.py) proves a control message was written by a cluster process for that
inbox, but not that it is new: someone with only the Redis URL can ``LRANGE`` a deploy, cancel,
task_state or slot_lost and ``RPUSH`` it again later. Each sender therefore stamps the sealed body with
its own random id, a sequence number it never reuses, and its wall-clock time. A receiver keeps, per
sender, the highest sequence seen and the numbers seen in the ``window`` below it (messages of one
sender may arrive out of order: several threads send), and refuses a number seen before, one that fell
out of the window, and a message older than ``max_age_s`` by its own stamp (so a replay from a sender
the receiver never heard of, e.g. from before the receiver restarted, is bounded in time too). The
table is bounded: senders silent for ``max_age_s`` are forgotten, which is safe because their old
messages are refused by age.

A window held in memory starts empty when its process restarts, so the JobManager's inbox also
demands its ``epoch`` (Flink's fencing token): a number taken from SQL at each start (or the leader
lease's token with HA), larger than any before, that every message to it carries under the seal.
A message sealed for an earlier JobManager is refused whatever its age (``check_epoch``).

Numbered list elements (print lines) are judged by ``ElementPositions``, which can keep what it read
in a durable record (``LineMarkStore``, the JobManager's SQL job store) so a restart forgets nothing.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
from collections import OrderedDict
from typing import Callable, Mapping, Protocol

from millstream.engine.security.mac import Unauthenticated, log, refused

#: how many sequence numbers below a sender's highest are remembered (out-of-order arrival)
WINDOW = 4096
#: a message older than this by its sender's clock is refused (clocks of one cluster are assumed
#: within a minute or two of each other; messages queued while a JobManager restarts are younger)
MAX_AGE_S = 600.0
#: senders remembered at most (oldest dropped first; their old messages are refused by age)
MAX_SENDERS = 65_536

_state: dict[str, object] = {}
_lock = threading.Lock()


def stamp() -> tuple[str, int, int]:
    """This process's sender id, its next sequence number and the time now (ms): what a sealed
    control message carries. The id is new in every process (a forked child gets its own)."""
    with _lock:
        if _state.get("pid") != os.getpid():
            _state.update(pid=os.getpid(), id=uuid.uuid4().hex, seq=itertools.count(1))
        sender, seq = _state["id"], next(_state["seq"])  # type: ignore[call-overload]
    return str(sender), int(seq), int(time.time() * 1000)


class ReplayError(Unauthenticated):
    """A genuine message seen before (or too old to tell): dropped, never acted on twice."""


class ReplayWindow:
    """The receiver's side, for one inbox. ``check`` raises ReplayError for a replayed message."""

    def __init__(
        self, where: str, window: int = WINDOW, max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.time, max_senders: int = MAX_SENDERS, epoch: int | None = None,
    ) -> None:
        self.where = where
        self.epoch = epoch  # the receiver's epoch, which every message must carry; None: not checked
        self.window = window
        self.max_age_ms = int(max_age_s * 1000)
        self.clock = clock
        self.max_senders = max_senders
        # sender -> (highest sequence, sequences seen in (highest - window, highest], last heard ms)
        self._senders: OrderedDict[str, tuple[int, set[int], int]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, sender: object, seq: object, ts: object) -> None:
        if not isinstance(sender, str) or not isinstance(seq, int) or not isinstance(ts, int):
            self._refuse("it carries no sender, sequence number and time")
        now = int(self.clock() * 1000)
        if now - ts > self.max_age_ms:  # type: ignore[operator]
            self._refuse(f"it is {(now - ts) / 1000:.0f} s old, older than the replay window")  # type: ignore[operator]
        with self._lock:
            highest, seen, _ = self._senders.pop(sender, (0, set(), now))  # type: ignore[arg-type]
            try:
                if seq in seen or seq <= highest - self.window:  # type: ignore[operator]
                    self._refuse(f"message {seq} of sender {sender} was accepted before")
                seen.add(seq)  # type: ignore[arg-type]
                if seq > highest:  # type: ignore[operator]
                    highest = seq  # type: ignore[assignment]
                    floor = highest - self.window
                    if len(seen) > self.window:
                        seen = {s for s in seen if s > floor}
            finally:
                self._senders[sender] = (highest, seen, now)  # type: ignore[index]
                self._forget(now)

    def check_epoch(self, epoch: object) -> None:
        """Refuse a message sealed for another epoch of the receiver (one from before it restarted)."""
        if self.epoch is not None and epoch != self.epoch:
            self._refuse(f"it was sealed for epoch {epoch!r} of its receiver, which is at epoch {self.epoch} now")

    def _forget(self, now: int) -> None:
        while self._senders:
            sender, (_, _, heard) = next(iter(self._senders.items()))
            if len(self._senders) <= self.max_senders and now - heard <= self.max_age_ms:
                break
            del self._senders[sender]

    def _refuse(self, why: str) -> None:
        refused["replay"] = refused.get("replay", 0) + 1
        log.warning("refused a replayed control message in %s: %s", self.where, why)
        raise ReplayError(f"replayed control message in {self.where}: {why}")


class LineMarkStore(Protocol):
    """The durable record (the JobManager's SQL job store) of what a reader of one job's numbered list
    read: each writer's highest index and the position it was read at, and how long the list was."""

    def highest(self, writer: bytes) -> tuple[int, int, int, int]:
        """(highest index read, its position, the lowest index that may be read again, the list length
        read up to): -1, -1, 0 for a writer never read; the length is the job's, over every writer."""

    def save(self, marks: Mapping[bytes, tuple[int, int]], upto: int) -> None:
        """Raise the writers' (index, position) marks, the list having been read up to ``upto``."""

    def reset(self, upto: int) -> None:
        """The list was found shorter (``upto``) than it was read: nothing read before may be read again."""


class ElementPositions:
    """Which numbered element each position of one append-only Redis list holds, for its readers.

    Writers number their elements under the MAC (a random writer id and an index counting up from 0,
    appended in order), so an element copied and pushed again carries a number seen before, at a
    later position. ``accept`` is False for such a copy, and True for a new element or for the one
    read at that same position before (a retried read, a second reader), within the ``keep`` newest
    positions read: an element read again further back counts as a copy. The caller also drops
    positions that left the list with ``forget_before``. A reader that restarts forgets all of it:
    copies of what it read before are then taken as new once, unless it has a ``durable`` record.

    With one, a writer this reader has not met is looked up there once: an element at or below the
    writer's recorded index is taken as read again only where that element could have been (at most
    the recorded position less the writer's elements after it); elsewhere it is a copy. A list found
    shorter than it was read (``total``, set by the caller before it judges: Redis restarted, or
    someone deleted it and maybe rebuilt it from copies), or holding such a copy, holds nothing that
    may be read again: that is recorded (``reset``), so every element read before is a copy from then
    on, whatever the list's length later. ``save_durable`` records what was accepted."""

    def __init__(self, keep: int = 4096, durable: LineMarkStore | None = None) -> None:
        self.lock = threading.Lock()
        self.keep = keep
        self._at: dict[int, tuple[bytes, int]] = {}
        self._last: dict[bytes, int] = {}
        self._newest = -1
        self.primed = False  # the reader has taken in what the list held before its first read
        self.durable = durable
        self.total = 0  # the list's length (elements ever appended) at the read being judged
        self._marks: dict[bytes, tuple[int, int, int]] = {}  # writer -> (index, position, floor) recorded
        self._durable_upto: int | None = None  # the list length read up to, once looked up
        self._unsaved: dict[bytes, tuple[int, int]] = {}

    def accept(self, position: int, writer: bytes, index: int) -> bool:
        if self._at.get(position) == (writer, index):
            return True
        if index <= self._last.get(writer, -1):
            return False
        if self.durable is not None and not self._durable_allows(position, writer, index):
            return False
        self._at[position] = (writer, index)
        self._last[writer] = index
        if position > self._newest:
            self._newest = position
            if len(self._at) > 2 * self.keep:  # amortised: prune once twice as many are held
                self.forget_before(position - self.keep)
        return True

    def _durable_allows(self, position: int, writer: bytes, index: int) -> bool:
        assert self.durable is not None
        mark = self._marks.get(writer)
        if mark is None:
            high, at, floor, upto = self.durable.highest(writer)
            mark = self._marks[writer] = (high, at, floor)
            if self._durable_upto is None:
                self._durable_upto = upto
        if self._durable_upto is not None and self.total < self._durable_upto:
            # Fewer elements than were read: the list was emptied (and maybe rebuilt). Its positions
            # start again, so no element read before is where it was: all are copies from now on.
            self._reset()
            mark = self._marks[writer]
        high, at, floor = mark
        if index > high:
            self._unsaved[writer] = (index, position)
            return True
        if index < floor:
            return False
        # Read before this reader was made. A writer appends in order, so its element ``index`` sat
        # at least (high - index) positions before the one its highest was read at.
        if position <= at - (high - index):
            return True
        # Further on than it can have been: the list was rebuilt from copies (its length kept up), so
        # its positions say nothing any more either.
        self._reset()
        return False

    def _reset(self) -> None:
        assert self.durable is not None
        self.durable.reset(self.total)
        self._marks = {w: (h, a, h + 1) for w, (h, a, _) in self._marks.items()}
        self._durable_upto = self.total

    def save_durable(self, upto: int) -> None:
        """Record the writers' new elements accepted since the last call, the list read up to ``upto``."""
        if self.durable is not None and self._unsaved:
            self.durable.save(dict(self._unsaved), upto)
            for writer, (index, position) in self._unsaved.items():
                self._marks[writer] = (index, position, self._marks.get(writer, (0, 0, 0))[2])
            self._durable_upto = max(self._durable_upto or 0, upto)
            self._unsaved.clear()

    def forget_before(self, position: int) -> None:
        if self._at and min(self._at) < position:
            for p in [p for p in self._at if p < position]:
                del self._at[p]
