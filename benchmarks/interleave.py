"""Interleaved A/B runs: how every ratio in ``make bench`` is measured on a shared, noisy machine.

The two sides run in pairs, one right after the other, so load that comes and goes hits both alike,
and the order alternates (ABBA) so neither side is always the one that runs first. Callers do their
own warm-up (the first job on a fresh cluster or build is slower) and take the median of the
per-pair ratios.
"""
from __future__ import annotations

from typing import Callable, TypeVar

A = TypeVar("A")
B = TypeVar("B")


def abba_pairs(pairs: int, first: Callable[[], A], second: Callable[[], B]) -> list[tuple[A, B]]:
    """``pairs`` results of ``(first(), second())``, run in the order AB, BA, AB, ..."""
    runs: list[tuple[A, B]] = []
    for i in range(pairs):
        if i % 2 == 0:
            a = first()
            b = second()
        else:
            b = second()
            a = first()
        runs.append((a, b))
    return runs
