"""What a chain's merge rule costs over a long run: bytes written per checkpoint against bytes changed.

A model, not a cluster run: ``L`` live keys, filled by a few big deltas, then ``u`` random keys updated per
checkpoint interval (the 1 %-per-interval job of ``large_state_updates_job.py``). Each checkpoint asks
``state_chain.merge_start`` (the rule both backends' writers follow) which of the chain's files to merge
before its delta; a file's size is its entries, a merge of deltas keeps each key once (of E random
updates over L keys about ``L * (1 - exp(-E / L))`` distinct ones), a base holds the live keys. Printed
per rule: the mean of written / changed over the steady state, the longest chain, and the most a restore
would replay, in live entries.

Every rule that keeps a restore under twice the state stays near or above 2x: each interval's updates
make as many older entries obsolete, and purging them from files at most half obsolete rewrites at
least as many live entries. A base at 3x live with longer chains (65 files) comes under 2x, at the price
of restores that replay 3x the state.

``python benchmarks/merge_policy_sim.py [--steps 1500]``
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from millstream.engine.runtime.state.state_chain import BASE, DELTA, SharedFile, merge_start  # noqa: E402

Rule = Callable[[tuple[SharedFile, ...], int, int], "int | None"]
FILL = (300_000, 300_000, 300_000, 100_000)  # the fill phase's deltas: every key new


def simulate(rule: Rule, live_keys: int = 1_000_000, updates: int = 10_000, steps: int = 1500, max_files: int = 33) -> tuple[float, int, float]:
    """(mean written / changed, longest chain, most entries a restore replays / live) after warm-up."""
    chain: list[SharedFile] = []
    rows: list[tuple[int, int, int, float]] = []
    live = 0

    def file(kind: str, entries: int) -> SharedFile:
        return SharedFile("sim", kind, entries, (), entries)

    for step in range(len(FILL) + steps):
        new = FILL[step] if step < len(FILL) else updates
        if step < len(FILL):
            live = min(live_keys, live + new)
        written = 0
        start = rule(tuple(chain), live, max_files) if chain else None
        if start is not None:
            merged = chain[start:]
            entries = sum(f.entries for f in merged)
            size = live if start == 0 else min(entries, int(live_keys * (1 - math.exp(-entries / live_keys))))
            written += size
            chain = [*chain[:start], file(BASE if start == 0 else DELTA, size)]
        chain.append(file(DELTA, new))
        written += new
        rows.append((written, new, len(chain), sum(f.entries for f in chain) / max(live, 1)))
    steady = rows[len(FILL) + 50 :]
    mean = sum(r[0] for r in steady) / sum(r[1] for r in steady)
    return mean, max(r[2] for r in steady), max(r[3] for r in steady)


def tiered(factor: float, ratio: float) -> Rule:
    """``merge_start`` with its two constants as parameters: a base once the entries pass ``factor`` x
    live; at the chain's length, the newest files merge back while the file before them, times
    ``ratio``, is no bigger than they are together."""

    def rule(parent: tuple[SharedFile, ...], live: int, max_files: int) -> int | None:
        n = len(parent)
        if n < 2:
            return None
        if sum(f.entries for f in parent) > factor * live:
            return 0
        if n < max_files:
            return None
        start, newer = n - 2, parent[-1].size + parent[-2].size
        for i in range(n - 3, -1, -1):
            if parent[i].size * ratio > newer:
                break
            start, newer = i, newer + parent[i].size
        return min(start, max(0, max_files - 2))

    return rule


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500, help="checkpoints after the fill phase")
    args = ap.parse_args()
    mean, longest, replay = simulate(lambda p, live, mf: merge_start(p, live, mf), steps=args.steps)
    print(f"merge_start as it is (33 files): written/changed mean {mean:.2f}, chain <= {longest}, restore <= {replay:.2f}x live")
    for factor in (2, 3, 4):
        for ratio in (1, 2, 4):
            for max_files in (33, 65):
                mean, longest, replay = simulate(tiered(factor, ratio), steps=args.steps, max_files=max_files)
                print(
                    f"base at {factor}x live, tier ratio {ratio}, {max_files} files: mean {mean:.2f}, "
                    f"chain <= {longest}, restore <= {replay:.2f}x live"
                )


if __name__ == "__main__":
    main()
