"""The source protocol: a source splits its input per subtask and reads in batches.

A reader's position is plain data (``snapshot()``/``restore``) so checkpoints can
rewind it. Readers do no network I/O of their own unless the source is external.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class SourceReader(ABC):
    """Reads one split. ``poll_batch`` returns records, [] when nothing is ready, None at the end."""

    @abstractmethod
    def poll_batch(self, max_records: int) -> list[Any] | None: ...

    def snapshot(self) -> Any:
        """The position to resume from; plain msgpack-able data."""
        return None

    def close(self) -> None:
        pass


class Source(ABC):
    """A (possibly parallel) source of records."""

    #: a non-parallel source always runs with parallelism 1
    parallel: bool = True

    @abstractmethod
    def is_bounded(self) -> bool: ...

    @abstractmethod
    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader: ...

    def name(self) -> str:
        return type(self).__name__
