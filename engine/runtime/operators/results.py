"""Routing a user function's results: main output records and ``(OutputTag, value)`` side outputs."""
from __future__ import annotations

from typing import Any

from millstream.engine.datastream.output_tag import OutputTag


class ResultCollector:
    """Buffers one batch worth of results, split by output, then emits them together."""

    def __init__(self, operator: Any) -> None:
        self.op = operator
        self.values: list[Any] = []
        self.stamps: list[int | None] = []
        self.side: dict[str, tuple[list[Any], list[int | None]]] = {}

    def add_result(self, result: Any, ts: int | None) -> None:
        if result is None:
            return
        if isinstance(result, (str, bytes)):
            raise TypeError("a process function must yield records (or return an iterable), not a string")
        for item in result:
            self.add(item, ts)

    def add(self, item: Any, ts: int | None) -> None:
        if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
            vals, stamps = self.side.setdefault(item[0].tag_id, ([], []))
            vals.append(item[1])
            stamps.append(ts)
        else:
            self.values.append(item)
            self.stamps.append(ts)

    def add_records(self, items: list[Any], ts: int | None) -> None:
        """Plain records, such as window results: never read as side outputs."""
        self.values.extend(items)
        self.stamps.extend([ts] * len(items))

    def add_side(self, tag: OutputTag, value: Any, ts: int | None) -> None:
        vals, stamps = self.side.setdefault(tag.tag_id, ([], []))
        vals.append(value)
        stamps.append(ts)

    def flush(self) -> None:
        if self.values:
            self.op.output.emit(self.values, _stamps(self.stamps))
            self.values, self.stamps = [], []
        for tag, (vals, stamps) in self.side.items():
            if vals:
                self.op.emit_side(tag, vals, _stamps(stamps))
        self.side = {}


def _stamps(stamps: list[int | None]) -> list[int] | None:
    # A batch either carries timestamps for every record or for none.
    if any(s is None for s in stamps):
        return None
    return stamps  # type: ignore[return-value]
