"""The on-disk backend's records read key group by key group, for snapshots that must not hold the
whole state in memory (issue 16: state larger than memory is checkpointed).

Each table is an iterator of raw records ``(LMDB key, record)`` sorted by LMDB key, which starts
with the key group (``state_records.KG_BYTES``), e.g. an LMDB cursor's ``iternext()`` on a read
transaction. ``by_key_group`` merges the tables into ``(key group, {state name: [records]})`` in
key-group order: at most one key group's records of each table, plus one block read ahead, are
in memory at a time. Blocks are taken from the iterator by ``islice`` (driven from C, no Python
code per record) and cut at key-group boundaries by bisection, as ``key_grouped_state`` does.
"""
from __future__ import annotations

import bisect
from itertools import islice
from typing import Any, Iterable, Iterator

from millstream.engine.runtime.state.state_records import KG_BYTES, key_group_prefix

Record = tuple[bytes, Any]
BLOCK = 4096  # records read ahead per table: about a MiB, yet enough per islice to stay in C

_LAST_KG = (1 << (8 * KG_BYTES)) - 1


class _Feed:
    """One table's records, a block at a time."""

    def __init__(self, records: Iterable[Record], block: int) -> None:
        self._it = iter(records)
        self._block = block
        self._buf: list[Record] = []
        self._pos = 0

    def _fill(self) -> bool:
        if self._pos < len(self._buf):
            return True
        self._buf = list(islice(self._it, self._block))
        self._pos = 0
        return bool(self._buf)

    def head(self) -> int | None:
        """The key group of the next record, None when the table is read to its end."""
        if not self._fill():
            return None
        return int.from_bytes(self._buf[self._pos][0][:KG_BYTES], "big")

    def take(self, kg: int) -> list[Record]:
        """The records of key group ``kg``, which the next record belongs to."""
        out: list[Record] = []
        while self._fill():
            buf, pos = self._buf, self._pos
            end = len(buf) if kg == _LAST_KG else bisect.bisect_left(buf, (key_group_prefix(kg + 1),), pos)
            out.extend(buf[pos:end])
            self._pos = end
            if end < len(buf):
                break
        return out


def by_key_group(tables: Iterable[tuple[str, Iterable[Record]]], block: int = BLOCK) -> Iterator[tuple[int, dict[str, list[Record]]]]:
    """``(key group, {state name: its records in that key group})`` in key-group order, over every
    key group that has a record in some table; a table with none there is left out of its dict."""
    feeds = [(name, _Feed(records, block)) for name, records in tables]
    while True:
        heads = [(name, feed, feed.head()) for name, feed in feeds]
        live = [h for _, _, h in heads if h is not None]
        if not live:
            return
        kg = min(live)
        yield kg, {name: feed.take(kg) for name, feed, h in heads if h == kg}
