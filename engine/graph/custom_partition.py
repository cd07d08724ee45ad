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
    # The user's Partitioner and KeySelector objects (Functions): as in PyFlink, each producing
    # subtask opens them with its runtime context before the first record and closes them at the end.
    functions: tuple[Any, ...] = ()

    def open(self, runtime_context: Any) -> None:
        for f in self.functions:
            f.open(runtime_context)

    def close(self) -> None:
        for f in self.functions:
            f.close()

    def channel(self, value: Any, n: int) -> int:
        index = self.partition(self.key_selector(value), n)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise ValueError(
                f"partition_custom: the partitioner returned {index!r} for a record, but the stream has "
                f"{n} partitions (a partition must be an int from 0 to {n - 1})"
            )
        return index
