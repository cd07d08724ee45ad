"""What rolled compaction costs over a long run: bytes written per checkpoint against bytes changed,
and what a restore replays.

A model, not a cluster run, of the heap backend's chains under ``rolled_compaction.RolledCompaction`` and
``rolled_compaction.prune`` (the functions the writer calls): ``L`` live keys spread over ``K`` key groups,
owned by ``P`` subtasks that rebase in turns (``rolled_compaction.turns``), filled by a few big deltas, then ``u`` random keys updated per checkpoint interval
(the 1 %-per-interval job of ``large_state_updates_job.py``: at 1 % each interval's keys are almost
all distinct). A delta holds each key group's updated keys; a partial base holds a key group's live
keys; a key costs ``B`` bytes in every file. Printed: written / changed of the job's checkpoints (all
subtasks' files; mean, p50, p99, max) over the steady state, the longest chain, and the most a restore replays against the live bytes; the same for
``merge_start`` (the rule before) is in ``merge_policy_sim.py``.

``python benchmarks/rolled_compaction_sim.py [--steps 1000] [--keys 1000000] [--subtasks 2] [--no-turns]``
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from millstream.engine.runtime.state.rolled_compaction import DEFAULT_ROLLED_CYCLE, RolledCompaction, prune  # noqa: E402
from millstream.engine.runtime.state.state_chain import BASE, DELTA, SharedFile, replay_reads  # noqa: E402

B = 50  # bytes per key in a file
FILL = (0.3, 0.3, 0.3, 0.1)  # the fill phase's deltas, shares of the live keys: every key new


def _file(name: str, kind: str, entries: dict[int, int], partial: bool = False) -> SharedFile:
    index, offset = [], 0
    for kg in sorted(entries):
        index.append((kg, offset, entries[kg] * B))
        offset += entries[kg] * B
    return SharedFile(name, kind, offset, tuple(index), sum(entries.values()), grouped=True, partial=partial)


def simulate(
    live_keys: int, key_groups: int, updates: float, steps: int, cycle: int, seed: int = 1, subtasks: int = 2, take_turns: bool = True
) -> dict[str, float]:
    """The job's figures: ``live_keys`` over ``key_groups`` (all subtasks'), ``subtasks`` chains, each
    checkpoint's written and changed bytes summed over the subtasks (what a checkpoint of the job
    writes); with ``take_turns`` the subtasks rebase in turns, as in the runtime (``turns``)."""
    rng = random.Random(seed)
    per_group = live_keys // key_groups
    own = [range(i * key_groups // subtasks, (i + 1) * key_groups // subtasks) for i in range(subtasks)]
    chains: list[tuple[SharedFile, ...]] = [() for _ in own]
    compactions = [RolledCompaction(cycle=cycle) for _ in own]  # what each subtask's writer asks (``choose``)
    if take_turns:
        for i, c in enumerate(compactions):
            c.take_turns(i, subtasks)
    held = [0] * key_groups  # live keys per key group
    rows: list[tuple[int, int, int, float]] = []  # (written, changed, longest chain, replay / live)
    for step in range(len(FILL) + steps):
        checkpoint = step + 1
        new: dict[int, int] = {}
        if step < len(FILL):
            new = {kg: int(per_group * FILL[step]) for kg in range(key_groups)}
            for kg, n in new.items():
                held[kg] += n
        else:
            for _ in range(int(live_keys * updates)):
                kg = rng.randrange(key_groups)
                new[kg] = new.get(kg, 0) + 1
        written = changed = read = 0
        replay = 0
        for i, groups in enumerate(own):
            delta = _file(f"d{step}.{i}", DELTA, {kg: n for kg, n in new.items() if kg in groups})
            due = compactions[i].choose((*chains[i], delta), delta.size, sum(held[kg] for kg in groups), checkpoint)
            rebased = _file(f"p{step}.{i}", BASE, {kg: held[kg] for kg in due}, partial=True) if due else None
            if due:  # a rebase reads its key groups' replay: their parts from their newest base on
                owned = frozenset(due)
                read += sum(length for _, _, index in replay_reads((*chains[i], delta), owned) for _, _, length in index)
            if rebased is not None:
                compactions[i].written(rebased.size)
            changed += delta.size
            if rebased is not None:  # the runtime's delta file leaves out the key groups rebased with it
                delta = _file(delta.name, DELTA, {kg: n for kg, n in new.items() if kg in groups and kg not in due})
            files = (delta,) if rebased is None else (delta, rebased) if delta.index else (rebased,)
            chains[i] = prune((*chains[i], *files))
            written += delta.size + (rebased.size if rebased else 0)
            replay += sum(length for _, _, index in replay_reads(chains[i]) for _, _, length in index)
        rows.append((written, changed, max(map(len, chains)), replay / (sum(held) * B), read))
    steady = rows[len(FILL) + min(2 * cycle, steps // 2) :]  # after a warm-up of two cycles where the run allows
    ratios = sorted(w / c for w, c, _, _, _ in steady)
    return {
        "mean": sum(r[0] for r in steady) / sum(r[1] for r in steady),
        "p50": statistics.median(ratios),
        "p99": ratios[int(0.99 * (len(ratios) - 1))],
        "max": ratios[-1],
        "chain": max(r[2] for r in steady),
        "replay": max(r[3] for r in steady),
        "read": sum(r[4] for r in steady) / sum(r[1] for r in steady),
    }


def describe(updates: float, keys: int = 1_000_000, key_groups: int = 128, steps: int = 1000, subtasks: int = 2, take_turns: bool = True) -> str:
    f = simulate(keys, key_groups, updates, steps, DEFAULT_ROLLED_CYCLE, subtasks=subtasks, take_turns=take_turns)
    return (
        f"{updates:.1%} of {keys:,} keys ({key_groups} key groups, {subtasks} subtasks{'' if take_turns else ', no turns'}) per interval: "
        f"written / changed mean {f['mean']:.2f}, p50 {f['p50']:.2f}, p99 {f['p99']:.2f}, max {f['max']:.2f}; "
        f"chain <= {f['chain']} files, restore <= {f['replay']:.2f}x live; compaction read / changed {f['read']:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000, help="checkpoints after the fill phase")
    ap.add_argument("--keys", type=int, default=1_000_000, help="live keys of the job")
    ap.add_argument("--key-groups", type=int, default=128, help="key groups (the max parallelism)")
    ap.add_argument("--subtasks", type=int, default=2, help="the operator's parallelism")
    ap.add_argument("--no-turns", action="store_true", help="every subtask may rebase in every checkpoint (the rule before)")
    ap.add_argument("--rates", type=float, nargs="+", default=[0.001, 0.01, 0.05, 0.2, 0.8], help="shares of the keys updated per interval")
    args = ap.parse_args()
    for updates in args.rates:
        print(describe(updates, args.keys, args.key_groups, args.steps, args.subtasks, not args.no_turns), flush=True)


if __name__ == "__main__":
    main()
