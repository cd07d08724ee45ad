"""State descriptors and state interfaces (``pyflink.datastream.state``)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, Iterable


class StateDescriptor:
    """Names a piece of state; ``enable_time_to_live`` makes its entries expire."""

    def __init__(self, name: str, type_info: Any = None) -> None:
        if not name:
            raise ValueError("a state descriptor needs a name")
        self.name = name
        self.type_info = type_info
        self.ttl_config: "StateTtlConfig | None" = None

    def enable_time_to_live(self, ttl_config: "StateTtlConfig") -> None:
        self.ttl_config = ttl_config

    def get_name(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    pass


class ListStateDescriptor(StateDescriptor):
    pass


class MapStateDescriptor(StateDescriptor):
    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None) -> None:
        super().__init__(name, value_type_info)
        self.key_type_info = key_type_info
        self.value_type_info = value_type_info


class ReducingStateDescriptor(StateDescriptor):
    def __init__(self, name: str, reduce_function: Any, type_info: Any = None) -> None:
        super().__init__(name, type_info)
        self.reduce_function = reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    def __init__(self, name: str, agg_function: Any, state_type_info: Any = None) -> None:
        super().__init__(name, state_type_info)
        self.agg_function = agg_function


class StateTtlConfig:
    """Flink's state time-to-live: entries expire ``ttl`` ms after creation (and, by default, each write)."""

    class UpdateType(Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        ProcessingTime = 0

    def __init__(self, ttl_ms: int, update_type: "StateTtlConfig.UpdateType", visibility: "StateTtlConfig.StateVisibility") -> None:
        self.ttl_ms = ttl_ms
        self.update_type = update_type
        self.visibility = visibility

    @staticmethod
    def new_builder(ttl: Any) -> "StateTtlConfig.Builder":
        return StateTtlConfig.Builder(ttl if isinstance(ttl, int) else ttl.to_milliseconds())

    def get_ttl(self) -> int:
        return self.ttl_ms

    class Builder:
        def __init__(self, ttl_ms: int) -> None:
            if ttl_ms <= 0:
                raise ValueError(f"state TTL must be positive, got {ttl_ms} ms")
            self.ttl_ms = ttl_ms
            self.update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self.visibility = StateTtlConfig.StateVisibility.NeverReturnExpired

        def set_update_type(self, update_type: "StateTtlConfig.UpdateType") -> "StateTtlConfig.Builder":
            self.update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, visibility: "StateTtlConfig.StateVisibility") -> "StateTtlConfig.Builder":
            self.visibility = visibility
            return self

        def never_return_expired(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def return_expired_if_not_cleaned_up(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def set_ttl_time_characteristic(self, characteristic: Any) -> "StateTtlConfig.Builder":
            return self

        def cleanup_full_snapshot(self) -> "StateTtlConfig.Builder":
            return self

        def cleanup_incrementally(self, *args: Any) -> "StateTtlConfig.Builder":
            return self

        def build(self) -> "StateTtlConfig":
            return StateTtlConfig(self.ttl_ms, self.update_type, self.visibility)


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


class ReducingState(State):
    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...


class AggregatingState(State):
    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...


class OperatorStateStore(ABC):
    """Operator (non-keyed) state of one subtask, from ``FunctionInitializationContext.get_operator_state_store()``.

    ``get_list_state``: on restore at another parallelism the elements of all subtasks are split
    evenly over the new ones. ``get_union_list_state``: every subtask gets all elements.
    """

    @abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState: ...

    @abstractmethod
    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> ListState: ...
