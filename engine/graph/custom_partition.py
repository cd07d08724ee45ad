"""partition_custom's routing: the user's partitioner applied to the user's key (Flink's CustomPartitionerWrapper)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class CustomPartition:
    """Which of ``n`` consumer subtasks a record goes to; a frozen description the graph carries to
    the producing tasks' record writers."""

    partition: Callable[[Any, int], int]
    key_selector: Callable[[Any], Any]

    def channel(self, value: Any, n: int) -> int:
        index = self.partition(self.key_selector(value), n)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise ValueError(
                f"partition_custom: the partitioner returned {index!r} for a record, but the stream has "
                f"{n} partitions (a partition must be an int from 0 to {n - 1})"
            )
        return index
