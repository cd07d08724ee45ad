"""State descriptors and state interfaces (``pyflink.datastream.state``)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class StateDescriptor:
    name: str
    type_info: Any = None


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor):
    pass


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor):
    pass


@dataclass(frozen=True)
class MapStateDescriptor:
    name: str
    key_type_info: Any = None
    value_type_info: Any = None


class State(ABC):
    @abstractmethod
    def clear(self) -> None: ...


class ValueState(State):
    @abstractmethod
    def value(self) -> Any: ...

    @abstractmethod
    def update(self, value: Any) -> None: ...


class ListState(State):
    @abstractmethod
    def get(self) -> Iterable[Any]: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...

    @abstractmethod
    def update(self, values: list[Any]) -> None: ...

    @abstractmethod
    def add_all(self, values: list[Any]) -> None: ...


class MapState(State):
    @abstractmethod
    def get(self, key: Any) -> Any: ...

    @abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abstractmethod
    def remove(self, key: Any) -> None: ...

    @abstractmethod
    def items(self) -> Iterable[tuple[Any, Any]]: ...

    @abstractmethod
    def keys(self) -> Iterable[Any]: ...

    @abstractmethod
    def values(self) -> Iterable[Any]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...
