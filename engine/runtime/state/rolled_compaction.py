"""Rolled compaction of incremental chains (both backends'): a few key groups rebased per checkpoint.

Rewriting a whole chain at once (FLIP-158's materialisation, and the heap backend's until issue 16's
change 15) cost one checkpoint all the state, and merging the newest files rewrote each byte several
times (a long-run mean of 2.5x the bytes changed at 1 % per interval). Files are grouped by key group,
so compaction can go a key group at a time instead: a checkpoint's writer writes its delta and, for
the key groups due, a *partial base* (``SharedFile.partial``) of their state, read from the chain's
files and the new delta (``heap_state_files.rebase``, ``incremental.rebase_groups``). A restore starts each key group at its newest base
(``state_chain.replay_reads``), and a file leaves the chain once no key group reads it (``prune``).

``RolledCompaction`` (one per backend, on the writer thread) chooses the key groups (``rolled_due``),
paid for by the deltas' bytes, so a checkpoint writes about twice what changed and a restore replays
one to two times the state; ``benchmarks/rolled_compaction_sim.py`` models long runs of it.

The subtasks of an operator take turns (``turns``): a subtask rebases only in the checkpoints of its
turn, with the credit its deltas earned since its last one. A key group's base is larger than one
subtask's delta at the update rates this is for (1 % of the state per interval over 2 subtasks: a
delta of 0.5 % of the state, a key group 0.8 %), so when every subtask could rebase in every
checkpoint some checkpoints had two of them rebase together and wrote 2.6-2.9x what changed, though
the mean was under 2x. Taking turns, a checkpoint holds every subtask's delta and at most the bases
of the subtasks whose turn it is, paid for by what they changed over the turn: about the operator's
delta again (as FLIP-158 spreads the subtasks' materialisations over time).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from millstream.engine.runtime.state.state_chain import Chain, SharedFile, key_group_starts, replay_reads

DEFAULT_ROLLED_CYCLE = 128
# At most this many checkpoints between a subtask's turns (``turns``): with more subtasks, several share
# a turn, each with fewer key groups and less credit, and no key group waits long for its base.
MAX_TURNS = 8


def turns(subtask: int, parallelism: int) -> tuple[int, int]:
    """(position, every): subtask ``subtask`` of ``parallelism`` may rebase in the checkpoints whose id
    is ``position`` modulo ``every``."""
    every = max(1, min(parallelism, MAX_TURNS))
    return subtask % every, every


@dataclass
class RolledCredit:
    """What a rolled compaction may still spend: bytes (each delta's, less the bases written for them)
    and key groups (``cycle``'s pace, less those rebased), each kept within bounds so that a
    quiet spell does not become a burst."""

    bytes: float = 0.0
    key_groups: float = 0.0
    limit: float = 0.0  # the bound of ``bytes`` either way: a round's deltas, or the costliest key group and a delta

    def spend(self, written: int) -> None:
        self.bytes = max(self.bytes - written, -self.limit)


def rolled_due(
    chain: Chain,
    credit: RolledCredit,
    delta_bytes: int,
    cycle: int = DEFAULT_ROLLED_CYCLE,
    live: int | None = None,
    turn: bool = True,
    every: int = 1,
) -> list[int]:
    """The key groups a rolled compaction rebases now, for ``chain`` (the parent and the new delta, of
    ``delta_bytes``), spending ``credit``; the writer then charges what it wrote (``RolledCredit.spend``).

    Rewriting a whole chain at once cost one checkpoint all the state (issue 16: bytes written must
    follow the bytes changed). Rebasing a few key groups per checkpoint spreads that: a key group's
    new base replaces its parts of every older file, and a file goes once no key group reads it any
    more (``prune``). A key group's *base* is its bytes in the file its replay starts from, its
    *replay* what it reads after that. Chosen, in this order:

    * while the byte credit (each delta's bytes, less the bases written) covers their cost (base and
      replay, scaled by the live entries against those replayed), the key groups whose replay passed
      their base, the largest ratio first: under overwrites a checkpoint writes its delta and about as
      much again, and a restore reads one to two times the state (under a stream of new keys it reads
      what is live whatever is rebased);
    * while the key-group credit (the key groups / ``cycle`` each checkpoint, less every key group
      rebased) is a whole one, the key group rebased longest ago, so every file is dropped within
      about ``cycle`` checkpoints however little changes.

    No rule forces a key group past the credit: under a stream of new keys every key group's replay
    keeps passing its base, and such a rule rebased most of them in the same checkpoint. Out of its
    ``turn`` (module docstring) a subtask earns both credits and rebases nothing; the byte credit
    is bounded by what it earns in a round of ``every`` checkpoints, or by the costliest key group
    and a delta if more (else a key group larger than a round's deltas were never paid for), so that
    a turn's bases come to about the operator's delta."""
    default, own = key_group_starts(chain)
    base: dict[int, int] = {}
    later: dict[int, int] = {}
    replayed, counted = 0.0, True  # entries a restore replays, each file's weighed by the share read
    for i, f, index in replay_reads(chain):
        read = 0
        for kg, _, length in index:
            read += length
            if i == own.get(kg, default):
                base[kg] = base.get(kg, 0) + length
            else:
                later[kg] = later.get(kg, 0) + length
        counted = counted and f.entries >= 0
        replayed += f.entries * read / max(1, f.size)
    groups = base.keys() | later.keys()
    if not groups:
        return []
    # What a key group's base will cost: its base and replay under new keys, about its base under
    # overwrites. ``live`` (entries in the tables) against the entries replayed says which, for the
    # state as a whole; the writer charges what it wrote.
    share = min(1.0, live / replayed) if live is not None and counted and replayed > 0 else 1.0
    cost = {kg: (base.get(kg, 0) + later.get(kg, 0)) * share for kg in groups}
    credit.limit = max(max(cost.values()) + delta_bytes, every * delta_bytes)
    credit.bytes = min(credit.bytes + delta_bytes, credit.limit)
    pace = len(groups) / max(1, cycle)
    credit.key_groups = min(credit.key_groups + pace, max(2.0, 2 * pace))
    if not turn:
        return []
    due = sorted((kg for kg, n in later.items() if n >= base.get(kg, 0)), key=lambda kg: (-later[kg] / max(1, base.get(kg, 0)), kg))
    chosen: list[int] = []
    spent = 0
    for kg in due:
        if spent + cost[kg] > credit.bytes:
            break
        chosen.append(kg)
        spent += cost[kg]
    credit.key_groups -= len(chosen)
    for kg in sorted(groups - set(chosen), key=lambda kg: (own.get(kg, default), kg)):
        if credit.key_groups < 1:
            break
        chosen.append(kg)
        credit.key_groups -= 1
    credit.key_groups = max(credit.key_groups, -float(len(groups)))
    return sorted(chosen)


def prune(chain: Chain) -> Chain:
    """``chain`` without the files no key group's replay reads any more (``replay_reads``): files before
    the newest whole base, and files each of whose key groups has a newer partial base. The newest
    two files stay: the checkpoint that wrote them refers to both."""
    default, own = key_group_starts(chain)
    n = len(chain)
    return tuple(
        f
        for i, f in enumerate(chain)
        if i >= default and (i >= n - 2 or not f.grouped or not f.indexed or any(own.get(r[0], default) <= i for r in f.index))
    )


def roll(parent: Chain, new: SharedFile, rebased: SharedFile | None) -> Chain:
    """The chain a ``rolled`` snapshot leaves: its ``parent`` (indexes read in), its delta and the
    partial base it wrote (of the state up to and including that delta), less what no replay reads
    any more."""
    return prune((*parent, new) if rebased is None else (*parent, new, rebased))


@dataclass
class RolledCompaction:
    """A backend's rolled compaction: its credit, and ``cycle`` (every key group is rebased at least
    once in that many checkpoints, which bounds a chain's length when little changes)."""

    cycle: int = DEFAULT_ROLLED_CYCLE
    credit: RolledCredit = field(default_factory=RolledCredit)
    position: int = 0  # this subtask's turn: checkpoints whose id is ``position`` modulo ``every`` (``turns``)
    every: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take_turns(self, subtask: int, parallelism: int) -> None:
        """Rebase only in this subtask's turns among its operator's ``parallelism`` subtasks."""
        self.position, self.every = turns(subtask, parallelism)

    def choose(self, chain: Chain, delta_bytes: int, live: int | None = None, checkpoint_id: int | None = None) -> list[int]:
        """Writer thread: the key groups to rebase now, ``chain`` being the parent and the new delta
        (``delta_bytes`` of it), ``live`` the entries at the barrier (``rolled_due``), in checkpoint
        ``checkpoint_id`` (None: a turn whatever the subtask's)."""
        turn = checkpoint_id is None or checkpoint_id % self.every == self.position
        with self._lock:
            return rolled_due(chain, self.credit, delta_bytes, self.cycle, live, turn, self.every)

    def written(self, size: int) -> None:
        """Writer thread: a partial base of ``size`` bytes was written."""
        with self._lock:
            self.credit.spend(size)

    def reset(self) -> None:
        """After a restore: nothing is owed either way."""
        with self._lock:
            self.credit = RolledCredit()
