"""User function interfaces with PyFlink's names (``pyflink.datastream.functions``).

A plain callable works wherever one of these is accepted; the runtime calls
``open``/``close`` on objects that define them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, TypeVar

from millstream.engine.compat.unsupported import java_only

if TYPE_CHECKING:
    from millstream.engine.metrics import MetricGroup
    from millstream.engine.datastream.state import (
        ListStateDescriptor,
        MapStateDescriptor,
        ValueStateDescriptor,
    )


IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
W = TypeVar("W")
W2 = TypeVar("W2")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")


class KeyedStateStore(ABC):
    """Where keyed state is created: a RuntimeContext, or a window function's per-window/global store."""

    @abstractmethod
    def get_state(self, state_descriptor: Any) -> Any: ...

    @abstractmethod
    def get_list_state(self, state_descriptor: Any) -> Any: ...

    @abstractmethod
    def get_map_state(self, state_descriptor: Any) -> Any: ...

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError


class RuntimeContext(ABC):
    """What a running function may ask of its subtask."""

    @abstractmethod
    def get_task_name(self) -> str: ...

    @abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_index_of_this_subtask(self) -> int: ...

    @abstractmethod
    def get_attempt_number(self) -> int: ...

    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None:
        return default_value

    def get_task_name_with_subtasks(self) -> str:
        """Flink's form: ``name (index+1/parallelism)#attempt``."""
        return (
            f"{self.get_task_name()} ({self.get_index_of_this_subtask() + 1}/"
            f"{self.get_number_of_parallel_subtasks()})#{self.get_attempt_number()}"
        )

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no reducing state")

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no aggregating state")

    def get_metrics_group(self) -> "MetricGroup":
        """The function's metric group (``pyflink.metrics``). Where nothing reports metrics (this
        default), the metrics work but are reported nowhere."""
        from millstream.engine.metrics.groups import UnregisteredMetricGroup

        return UnregisteredMetricGroup()

    @abstractmethod
    def get_state(self, state_descriptor: "ValueStateDescriptor") -> Any: ...

    @abstractmethod
    def get_list_state(self, state_descriptor: "ListStateDescriptor") -> Any: ...

    @abstractmethod
    def get_map_state(self, state_descriptor: "MapStateDescriptor") -> Any: ...


class Function:
    """Base of every user function."""

    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


class MapFunction(Function):
    @abstractmethod
    def map(self, value: Any) -> Any: ...


class FlatMapFunction(Function):
    @abstractmethod
    def flat_map(self, value: Any) -> Iterable[Any]: ...


class FilterFunction(Function):
    @abstractmethod
    def filter(self, value: Any) -> bool: ...


class ReduceFunction(Function):
    @abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class KeySelector(Function):
    @abstractmethod
    def get_key(self, value: Any) -> Any: ...


class NullByteKeySelector(KeySelector):
    """Every record gets the same key: how window_all puts the whole stream in one keyed window."""

    def get_key(self, value: Any) -> Any:
        return 0


class Partitioner(Function):
    """``partition_custom``: picks the target subtask of a record's key."""

    @abstractmethod
    def partition(self, key: Any, num_partitions: int) -> int: ...


class FunctionSnapshotContext(ABC):
    """What ``CheckpointedFunction.snapshot_state`` learns about the checkpoint being taken."""

    @abstractmethod
    def get_checkpoint_id(self) -> int: ...

    @abstractmethod
    def get_checkpoint_timestamp(self) -> int: ...


class FunctionInitializationContext(FunctionSnapshotContext):
    """What ``CheckpointedFunction.initialize_state`` gets: the operator state store, and whether the
    state was restored from a checkpoint (then ``get_checkpoint_id`` names it, else it returns None)."""

    @abstractmethod
    def is_restored(self) -> bool: ...

    @abstractmethod
    def get_operator_state_store(self) -> Any:
        """Has ``get_list_state(ListStateDescriptor)`` and ``get_union_list_state(ListStateDescriptor)``."""


class CheckpointedFunction(ABC):
    """Flink's CheckpointedFunction for sources and sinks: operator list state, snapshot per checkpoint.

    ``initialize_state`` runs once before the first record (after ``open``), ``snapshot_state``
    each time a checkpoint is taken, on the task's thread, before its barrier goes downstream.
    """

    @abstractmethod
    def snapshot_state(self, context: FunctionSnapshotContext) -> None: ...

    @abstractmethod
    def initialize_state(self, context: FunctionInitializationContext) -> None: ...


class CheckpointListener(ABC):
    """Told when a checkpoint completes everywhere (the commit point), or is aborted."""

    @abstractmethod
    def notify_checkpoint_complete(self, checkpoint_id: int) -> None: ...

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass


class SinkFunction(Function):
    """A user sink: ``invoke(value, context)`` is called for every record."""

    get_java_function = java_only("the SinkFunction itself, stream.add_sink(sink_function)")

    def invoke(self, value: Any, context: Any) -> None:
        raise NotImplementedError


class TimeDomain(Enum):
    EVENT_TIME = 0
    PROCESSING_TIME = 1


class TimerService(ABC):
    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...

    @abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None: ...


class ProcessFunction(Function):
    """``process_element`` may return or yield any number of outputs."""

    class Context(ABC):
        @abstractmethod
        def timestamp(self) -> int: ...  # Long.MIN_VALUE for a record without one, as in PyFlink

        @abstractmethod
        def timer_service(self) -> TimerService: ...

    @abstractmethod
    def process_element(self, value: Any, ctx: "ProcessFunction.Context") -> Any: ...


class KeyedProcessFunction(Function):
    """A process function on a keyed stream, with keyed state and timers."""

    class Context(ABC):
        @abstractmethod
        def timestamp(self) -> int: ...

        @abstractmethod
        def timer_service(self) -> TimerService: ...

        @abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(Context):
        @abstractmethod
        def time_domain(self) -> Any: ...

    @abstractmethod
    def process_element(self, value: Any, ctx: "KeyedProcessFunction.Context") -> Any: ...

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext") -> Any:
        pass


class AggregateFunction(Function):
    """Incremental aggregation: accumulator in, result out (used by windows and AggregatingState)."""

    @abstractmethod
    def create_accumulator(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any: ...

    @abstractmethod
    def get_result(self, accumulator: Any) -> Any: ...

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.merge is needed for merging (session) windows")


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    @abstractmethod
    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Iterable[Any]: ...


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """``window_all(...).apply(fn)``: like WindowFunction, without a key."""

    @abstractmethod
    def apply(self, window: Any, inputs: Iterable[Any]) -> Iterable[Any]: ...


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    class Context(ABC, Generic[W2]):
        @abstractmethod
        def window(self) -> Any: ...

        @abstractmethod
        def current_processing_time(self) -> int: ...

        @abstractmethod
        def current_watermark(self) -> int: ...

        def window_state(self) -> Any:
            """A KeyedStateStore (``get_state``, ``get_list_state``...) for the current key and window.
            Clear it in ``clear``; whatever is left is dropped when the window is cleaned up."""
            raise NotImplementedError

        def global_state(self) -> Any:
            """A KeyedStateStore for the current key, across all its windows."""
            raise NotImplementedError

    @abstractmethod
    def process(self, key: Any, context: "ProcessWindowFunction.Context", elements: Iterable[Any]) -> Iterable[Any]: ...

    def clear(self, context: "ProcessWindowFunction.Context") -> None:
        pass


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """``window_all(...).process(fn)``: like ProcessWindowFunction, without a key."""

    class Context(ABC, Generic[W2]):
        @abstractmethod
        def window(self) -> Any: ...

        def window_state(self) -> Any:
            """A KeyedStateStore for this window, dropped when the window is cleaned up."""
            raise NotImplementedError

        def global_state(self) -> Any:
            """A KeyedStateStore shared by all windows."""
            raise NotImplementedError

    @abstractmethod
    def process(self, context: "ProcessAllWindowFunction.Context", elements: Iterable[Any]) -> Iterable[Any]: ...

    def clear(self, context: "ProcessAllWindowFunction.Context") -> None:
        pass


class CoMapFunction(Function):
    @abstractmethod
    def map1(self, value: Any) -> Any: ...

    @abstractmethod
    def map2(self, value: Any) -> Any: ...


class CoFlatMapFunction(Function):
    @abstractmethod
    def flat_map1(self, value: Any) -> Iterable[Any]: ...

    @abstractmethod
    def flat_map2(self, value: Any) -> Iterable[Any]: ...


class CoProcessFunction(Function):
    # The runtime gives both inputs the context of a ProcessFunction; one class keeps isinstance true.
    Context = ProcessFunction.Context

    @abstractmethod
    def process_element1(self, value: Any, ctx: "CoProcessFunction.Context") -> Iterable[Any]: ...

    @abstractmethod
    def process_element2(self, value: Any, ctx: "CoProcessFunction.Context") -> Iterable[Any]: ...


class KeyedCoProcessFunction(Function):
    # Same contexts as KeyedProcessFunction (the runtime shares them): isinstance checks hold.
    Context = KeyedProcessFunction.Context
    OnTimerContext = KeyedProcessFunction.OnTimerContext

    @abstractmethod
    def process_element1(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Iterable[Any]: ...

    @abstractmethod
    def process_element2(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Iterable[Any]: ...

    def on_timer(self, timestamp: int, ctx: "KeyedCoProcessFunction.OnTimerContext") -> Iterable[Any]:
        pass


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share: their context types."""

    class BaseContext(ABC):
        @abstractmethod
        def timestamp(self) -> int: ...

        @abstractmethod
        def current_processing_time(self) -> int: ...

        @abstractmethod
        def current_watermark(self) -> int: ...

    class Context(BaseContext):
        """The broadcast input's context: broadcast state is writable."""

        @abstractmethod
        def get_broadcast_state(self, state_descriptor: "MapStateDescriptor") -> Any: ...

    class ReadOnlyContext(BaseContext):
        """The regular input's context: broadcast state is read-only."""

        @abstractmethod
        def get_broadcast_state(self, state_descriptor: "MapStateDescriptor") -> Any: ...


class BroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[IN1, IN2, OUT]):
    """Input 1 is the regular stream, input 2 the broadcast stream that updates broadcast state."""

    class Context(BaseBroadcastProcessFunction.Context, ABC):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, ABC):
        pass

    @abstractmethod
    def process_element(self, value: Any, ctx: "BroadcastProcessFunction.ReadOnlyContext") -> Iterable[Any]: ...

    @abstractmethod
    def process_broadcast_element(self, value: Any, ctx: "BroadcastProcessFunction.Context") -> Iterable[Any]: ...


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[KEY, IN1, IN2, OUT]):
    class Context(BaseBroadcastProcessFunction.Context, ABC):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, ABC):
        @abstractmethod
        def timer_service(self) -> TimerService: ...

        @abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(ReadOnlyContext, ABC):
        @abstractmethod
        def time_domain(self) -> "TimeDomain | None": ...

    @abstractmethod
    def process_element(self, value: Any, ctx: "KeyedBroadcastProcessFunction.ReadOnlyContext") -> Iterable[Any]: ...

    @abstractmethod
    def process_broadcast_element(self, value: Any, ctx: "KeyedBroadcastProcessFunction.Context") -> Iterable[Any]: ...

    def on_timer(self, timestamp: int, ctx: "KeyedBroadcastProcessFunction.OnTimerContext") -> Iterable[Any]:
        pass


# -- asynchronous I/O (AsyncDataStream) -------------------------------------------------
class AsyncRetryPredicate(ABC, Generic[OUT]):
    """When an attempt of an AsyncFunction is retried: on its result list, or on its exception."""

    @abstractmethod
    def result_predicate(self) -> "Callable[[list[OUT]], bool] | None":
        """A test of an attempt's result list; True asks for another attempt (None: never)."""

    @abstractmethod
    def exception_predicate(self) -> "Callable[[Exception], bool] | None":
        """A test of an attempt's exception; True asks for another attempt (None: never)."""


class AsyncRetryStrategy(ABC, Generic[OUT]):
    """How often and after which delay an AsyncFunction call is attempted again."""

    @abstractmethod
    def can_retry(self, current_attempts: int) -> bool:
        """Whether another attempt may follow ``current_attempts`` attempts (the first is 1)."""

    @abstractmethod
    def get_backoff_time_millis(self, current_attempts: int) -> int:
        """The delay before the attempt that follows ``current_attempts`` attempts."""

    @abstractmethod
    def get_retry_predicate(self) -> AsyncRetryPredicate[OUT]:
        """The predicate deciding whether an attempt's outcome asks for a retry."""

    @staticmethod
    def no_restart() -> "AsyncRetryStrategy":
        from millstream.engine.datastream.async_retry_strategies import NO_RETRY_STRATEGY

        return NO_RETRY_STRATEGY

    @staticmethod
    def fixed_delay(
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: "Callable[[list[OUT]], bool] | None",
        exception_predicate: "Callable[[Exception], bool] | None",
    ) -> "AsyncRetryStrategy":
        from millstream.engine.datastream.async_retry_strategies import FixedDelayRetryStrategy

        return FixedDelayRetryStrategy(max_attempts, backoff_time_millis, result_predicate, exception_predicate)

    @staticmethod
    def exponential_backoff(
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: "Callable[[list[OUT]], bool] | None",
        exception_predicate: "Callable[[Exception], bool] | None",
    ) -> "AsyncRetryStrategy":
        from millstream.engine.datastream.async_retry_strategies import ExponentialBackoffDelayRetryStrategy

        return ExponentialBackoffDelayRetryStrategy(
            max_attempts, initial_delay, max_retry_delay, multiplier, result_predicate, exception_predicate
        )


class AsyncFunction(Function, Generic[IN, OUT]):
    """Asynchronous I/O: ``async_invoke`` is a coroutine returning the list of results of one input.

    The runtime runs it on an asyncio event loop of the operator instance, with up to the
    operator's capacity of calls in flight.
    """

    @abstractmethod
    async def async_invoke(self, value: IN) -> "list[OUT]":
        """The results of ``value`` (a list, possibly empty); raising fails the task (unless retried)."""

    def timeout(self, value: IN) -> "list[OUT]":
        """The results of an input whose call timed out; by default the job fails, as in Flink."""
        raise TimeoutError("Async function call has timed out for input: " + str(value))


class AsyncFunctionDescriptor:
    """An AsyncFunction with how it runs: what an async wait operator is made of."""

    class OutputMode(Enum):
        ORDERED = 0
        UNORDERED = 1

    def __init__(
        self,
        async_function: AsyncFunction,
        timeout: Any,
        capacity: int,
        async_retry_strategy: AsyncRetryStrategy,
        output_mode: "AsyncFunctionDescriptor.OutputMode",
    ) -> None:
        self.async_function = async_function
        self.timeout = timeout
        self.capacity = capacity
        self.async_retry_strategy = async_retry_strategy
        self.output_mode = output_mode


def __getattr__(name: str) -> Any:
    # PyFlink has SourceFunction here too; it lives with the source adapter (imported lazily: no cycle).
    if name == "SourceFunction":
        from millstream.engine.datastream.connectors.source_function import SourceFunction

        return SourceFunction
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
