"""State descriptors and state interfaces (``pyflink.datastream.state``)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, Iterable, Iterator

from millstream.engine.common.time import Duration, Time


class StateDescriptor:
    """Names a piece of state; ``enable_time_to_live`` makes its entries expire."""

    def __init__(self, name: str, type_info: Any = None) -> None:
        if not name:
            raise ValueError("a state descriptor needs a name")
        self.name = name
        self.type_info = type_info
        self.ttl_config: "StateTtlConfig | None" = None

    def enable_time_to_live(self, ttl_config: "StateTtlConfig") -> None:
        # UpdateType.Disabled means "no TTL" in Flink: the state then never expires.
        self.ttl_config = ttl_config if ttl_config.is_enabled() else None

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

    def get_reduce_function(self) -> Any:
        return self.reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    def __init__(self, name: str, agg_function: Any, state_type_info: Any = None) -> None:
        super().__init__(name, state_type_info)
        self.agg_function = agg_function

    def get_agg_function(self) -> Any:
        return self.agg_function


class StateTtlConfig:
    """Flink's state time-to-live: entries expire ``ttl`` ms after creation (and, by default, each write).

    Expired entries are never returned (with NeverReturnExpired) and are dropped
    when their key is next touched; the background cleanup options are recorded,
    and answer the getters, but need no action on Millstream's backends.
    ``UpdateType.Disabled`` turns TTL off for the descriptor it is given to.
    """

    class UpdateType(Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        ProcessingTime = 0

    def __init__(
        self,
        ttl_ms: int,
        update_type: "StateTtlConfig.UpdateType",
        visibility: "StateTtlConfig.StateVisibility",
        ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic | None" = None,
        cleanup_strategies: "StateTtlConfig.CleanupStrategies | None" = None,
    ) -> None:
        self.ttl_ms = ttl_ms
        self.update_type = update_type
        self.visibility = visibility
        self.ttl_time_characteristic = ttl_time_characteristic or StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
        self.cleanup_strategies = cleanup_strategies or StateTtlConfig.CleanupStrategies({}, True)

    @staticmethod
    def new_builder(ttl: Any) -> "StateTtlConfig.Builder":
        return StateTtlConfig.Builder(ttl)

    def get_ttl(self) -> Time:
        return Time.milliseconds(self.ttl_ms)

    def get_update_type(self) -> "StateTtlConfig.UpdateType":
        return self.update_type

    def get_state_visibility(self) -> "StateTtlConfig.StateVisibility":
        return self.visibility

    def get_ttl_time_characteristic(self) -> "StateTtlConfig.TtlTimeCharacteristic":
        return self.ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self.update_type is not StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> "StateTtlConfig.CleanupStrategies":
        return self.cleanup_strategies

    def __repr__(self) -> str:
        return (
            f"StateTtlConfig<ttl={self.ttl_ms} ms, update_type={self.update_type.name}, "
            f"state_visibility={self.visibility.name}, cleanup_in_background={self.cleanup_strategies.is_cleanup_in_background()}>"
        )

    class CleanupStrategies:
        """Which cleanups are configured: full snapshot, incremental, RocksDB compaction filter."""

        class Strategies(Enum):
            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy(ABC):  # noqa: B024 (a marker base, as in PyFlink)
            pass

        class EmptyCleanupStrategy(CleanupStrategy):
            pass

        class IncrementalCleanupStrategy(CleanupStrategy):
            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> None:
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            def __init__(self, query_time_after_num_entries: int, periodic_compaction_time: Any = None) -> None:
                self._query_time_after_num_entries = query_time_after_num_entries
                self._periodic_compaction_time = periodic_compaction_time or Duration.of_days(30)

            def get_query_time_after_num_entries(self) -> int:
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Duration:
                return self._periodic_compaction_time

        def __init__(self, strategies: dict[Any, Any], is_cleanup_in_background: bool) -> None:
            self._strategies = dict(strategies)
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(self) -> "StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy | None":
            default = StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(5, False) if self._is_cleanup_in_background else None
            return self._strategies.get(StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP, default)

        def get_rocksdb_compact_filter_cleanup_strategy(
            self,
        ) -> "StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy | None":
            default = (
                StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(1000)
                if self._is_cleanup_in_background
                else None
            )
            return self._strategies.get(StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER, default)

    class Builder:
        def __init__(self, ttl: Any) -> None:
            ttl_ms = _ttl_ms(ttl)
            if ttl_ms <= 0:
                raise ValueError(f"state TTL must be positive, got {ttl_ms} ms")
            self.ttl_ms = ttl_ms
            self.update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self.visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self.ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self.strategies: dict[Any, Any] = {}
            self.cleanup_in_background = True

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

        def set_ttl_time_characteristic(
            self, ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic"
        ) -> "StateTtlConfig.Builder":
            # Processing time is the only characteristic, in Flink as here.
            self.ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic(ttl_time_characteristic)
            return self

        def use_processing_time(self) -> "StateTtlConfig.Builder":
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def _strategy(self, name: "StateTtlConfig.CleanupStrategies.Strategies", value: Any) -> "StateTtlConfig.Builder":
            self.strategies[name] = value
            return self

        def cleanup_full_snapshot(self) -> "StateTtlConfig.Builder":
            S = StateTtlConfig.CleanupStrategies
            return self._strategy(S.Strategies.FULL_STATE_SCAN_SNAPSHOT, S.EmptyCleanupStrategy())

        def cleanup_incrementally(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> "StateTtlConfig.Builder":
            S = StateTtlConfig.CleanupStrategies
            return self._strategy(
                S.Strategies.INCREMENTAL_CLEANUP, S.IncrementalCleanupStrategy(cleanup_size, run_cleanup_for_every_record)
            )

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int, periodic_compaction_time: Any = None
        ) -> "StateTtlConfig.Builder":
            S = StateTtlConfig.CleanupStrategies
            return self._strategy(
                S.Strategies.ROCKSDB_COMPACTION_FILTER,
                S.RocksdbCompactFilterCleanupStrategy(query_time_after_num_entries, periodic_compaction_time),
            )

        def disable_cleanup_in_background(self) -> "StateTtlConfig.Builder":
            self.cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Any) -> "StateTtlConfig.Builder":
            self.ttl_ms = _ttl_ms(ttl)
            return self

        def build(self) -> "StateTtlConfig":
            return StateTtlConfig(
                self.ttl_ms,
                self.update_type,
                self.visibility,
                self.ttl_time_characteristic,
                StateTtlConfig.CleanupStrategies(self.strategies, self.cleanup_in_background),
            )


def _ttl_ms(ttl: Any) -> int:
    return int(ttl) if isinstance(ttl, int) else ttl.to_milliseconds()


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

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


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

    def put_all(self, dict_value: Any) -> None:
        # A dict, or (key, value) pairs: PyFlink's own put_all only takes the pairs.
        for k, v in dict_value.items() if hasattr(dict_value, "items") else dict_value:
            self.put(k, v)

    # Python's mapping protocol, as PyFlink's MapState has it.
    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


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

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        from millstream.engine.compat.unsupported import not_supported

        raise not_supported(
            "OperatorStateStore.get_broadcast_state",
            "broadcast state belongs to broadcast process functions here",
            "stream.broadcast(MapStateDescriptor) connected to a (Keyed)BroadcastProcessFunction",
        )


class ReadOnlyBroadcastState(State):
    """Broadcast state as the regular input sees it: MapState's reads only."""

    @abstractmethod
    def get(self, key: Any) -> Any: ...

    @abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abstractmethod
    def items(self) -> Iterable[tuple[Any, Any]]: ...

    @abstractmethod
    def keys(self) -> Iterable[Any]: ...

    @abstractmethod
    def values(self) -> Iterable[Any]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class BroadcastState(ReadOnlyBroadcastState):
    """Broadcast state as the broadcast input sees it: writable."""

    @abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abstractmethod
    def put_all(self, dict_value: dict[Any, Any]) -> None: ...

    @abstractmethod
    def remove(self, key: Any) -> None: ...

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)
