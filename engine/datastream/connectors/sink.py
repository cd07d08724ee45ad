"""The sink protocol used by ``DataStream.sink_to``: one writer per subtask."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class SinkWriter(ABC):
    @abstractmethod
    def write(self, value: Any) -> None: ...

    def flush(self, end_of_input: bool) -> None:
        pass

    def close(self) -> None:
        pass


class Sink(ABC):
    @abstractmethod
    def create_writer(self, subtask: int, parallelism: int) -> SinkWriter: ...

    def name(self) -> str:
        return type(self).__name__
