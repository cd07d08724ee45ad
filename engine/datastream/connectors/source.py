"""The source protocol: a source splits its input into splits and reads them in batches.

A reader's position is a **list of split states** (``snapshot()``), plain
msgpack-able data, so checkpoints can rewind it and a restore at another
parallelism can hand the splits of the old subtasks to the new ones:
``create_reader(subtask, parallelism, None)`` starts fresh and computes the
subtask's own splits; ``create_reader(subtask, parallelism, splits)`` resumes
exactly the given splits (after a rescale, possibly splits of several old
subtasks, or none). Readers do no network I/O of their own unless the source
is external.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Mapping, Sequence

from millstream.engine.checkpoint.rescale import redistribute_splits
from millstream.engine.compat.unsupported import java_only

SplitState = Any  # one split's resumable state: plain msgpack-able data


class SourceReader(ABC):
    """Reads its splits. ``poll_batch`` returns records, [] when nothing is ready, None at the end."""

    #: How long ``poll_batch`` may wait when nothing is ready. The task sets it before each poll to the
    #: time until its next output buffer is due (the buffer timeout): a reader that waited longer
    #: would hold records already emitted in the task's buffers past the timeout.
    max_idle_s: float = 0.05

    @abstractmethod
    def poll_batch(self, max_records: int) -> list[Any] | None: ...

    def snapshot(self) -> list[SplitState]:
        """The state of every split not yet finished, to resume from: a list, possibly empty."""
        return []

    def close(self) -> None:
        pass


class Source(ABC):
    """A (possibly parallel) source of records."""

    #: a non-parallel source always runs with parallelism 1
    parallel: bool = True

    get_java_function = java_only("the source itself, env.from_source(source, watermark_strategy, name)")

    @abstractmethod
    def is_bounded(self) -> bool: ...

    @abstractmethod
    def create_reader(self, subtask: int, parallelism: int, position: list[SplitState] | None = None) -> SourceReader:
        """A reader of this subtask's own splits (``position`` None) or of exactly the splits in ``position``."""

    def name(self) -> str:
        return type(self).__name__

    def redistribute_splits(
        self, positions: Mapping[int, Sequence[Any] | None], subtask: int, parallelism: int, old_parallelism: int
    ) -> list[SplitState] | None:
        """The splits ``subtask`` resumes from the old subtasks' positions ({old index: split states}):
        by default its own, or an even share of all of them after a rescale. A source whose splits
        belong to a particular subtask (as new files do to a monitoring FileSource) overrides this."""
        return redistribute_splits(positions, subtask, parallelism, old_parallelism)


def check_position(source: Source, position: Any) -> list[SplitState] | None:
    """``position`` as a list of split states, or a clear error naming the source."""
    if position is None or isinstance(position, list):
        return position
    if isinstance(position, tuple):
        return list(position)
    raise TypeError(
        f"{source.name()}: a reader position must be a list of split states, got {type(position).__name__} "
        f"{position!r} (a checkpoint taken before splits were introduced cannot be resumed)"
    )
