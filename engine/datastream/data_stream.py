"""``DataStream`` and ``KeyedStream``: the fluent API that records transformations.

Every call appends an immutable ``Transformation`` to the environment;
configuration calls (``name``, ``set_parallelism``...) replace the last one.
"""
from __future__ import annotations

from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable

from millstream.engine.client import collect_conversion
from millstream.engine.common.typeinfo import PickledBytesTypeInfo, TupleTypeInfo, Types
from millstream.engine.compat.unsupported import not_supported
from millstream.engine.datastream import aggregators
from millstream.engine.datastream.connectors.sink import Sink
from millstream.engine.datastream.functions import (
    FilterFunction,
    Function,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ReduceFunction,
    SinkFunction,
)
from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.datastream.connected_streams import BroadcastConnectedStream, BroadcastStream, ConnectedStreams
from millstream.engine.datastream.keyed_functions import (
    KeyedFilterAdapter,
    KeyedFlatMapAdapter,
    KeyedMapAdapter,
    may_use_keyed_state,
)
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.datastream.state import MapStateDescriptor
from millstream.engine.datastream.all_windowed_stream import AllWindowedStream
from millstream.engine.datastream.windowed_stream import WindowedStream
from millstream.engine.graph.output_types import output_type_of
from millstream.engine.graph.transformations import ChainingStrategy, OperatorKind, ShipStrategy
from millstream.engine.common.key_spec import key_spec, refuse_unstable_key_type
from millstream.engine.graph.custom_partition import CustomPartition
from millstream.engine.graph.json_generator import converts_to_string
from millstream.engine.client.job_client import CloseableIterator  # noqa: F401 (PyFlink exports it from this module)
from millstream.engine.windowing.assigners import CountSlidingWindowAssigner, CountTumblingWindowAssigner, GlobalWindows, WindowAssigner
from millstream.engine.windowing.triggers import CountTrigger
from millstream.engine.windowing.evictors import CountEvictor

if TYPE_CHECKING:
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment


def _check(fn: Any, cls: type, what: str) -> Any:
    if isinstance(fn, cls) or callable(fn):
        return fn
    raise TypeError(f"{what} expects a {cls.__name__} or a callable, got {type(fn).__name__}")


class DataStream:
    """A stream of records produced by one transformation."""

    def __init__(self, env: "StreamExecutionEnvironment", transformation_id: int) -> None:
        self._env = env
        self._id = transformation_id

    # -- configuration ---------------------------------------------------
    @property
    def _t(self):
        return self._env._transformations[self._id]

    def _update(self, **changes: Any) -> "DataStream":
        if self._t.kind.is_virtual:
            raise TypeError(f"cannot configure a {self._t.kind.value} step; configure the operator before it")
        self._env._transformations[self._id] = replace(self._t, **changes)
        return self

    def get_name(self) -> str:
        return self._t.name

    def get_type(self) -> Any:
        """The declared type of this stream's records (PICKLED_BYTE_ARRAY when none was given)."""
        return output_type_of(self._env._transformations, self._id)

    def name(self, name: str) -> "DataStream":
        return self._update(name=name)

    def uid(self, uid: str) -> "DataStream":
        return self._update(uid=uid)

    def set_description(self, description: str) -> "DataStream":
        return self

    def set_parallelism(self, parallelism: int) -> "DataStream":
        if self._t.fixed_parallelism is not None and parallelism != self._t.fixed_parallelism:
            raise ValueError(f"'{self._t.name}' is non-parallel; its parallelism must be 1")
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        return self._update(parallelism=parallelism)

    def get_parallelism(self) -> int:
        return self._t.fixed_parallelism or self._t.parallelism or self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> "DataStream":
        if not 0 < max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in 1..32768, got {max_parallelism}")
        return self._update(max_parallelism=max_parallelism)

    def disable_chaining(self) -> "DataStream":
        return self._update(chaining=ChainingStrategy.NEVER)

    def start_new_chain(self) -> "DataStream":
        return self._update(chaining=ChainingStrategy.HEAD)

    def slot_sharing_group(self, slot_sharing_group: Any) -> "DataStream":
        # Every operator shares the default group; accepted for PyFlink compatibility.
        return self

    # -- transformations -------------------------------------------------
    def _op(self, kind: OperatorKind, name: str, fn: Any, output_type: Any = None, **params: Any) -> "DataStream":
        tid = self._env._add(kind, name, (self._id,), function=fn, output_type=output_type, params=params)
        return DataStream(self._env, tid)

    def map(self, func: MapFunction | Callable[[Any], Any], output_type: Any = None) -> "DataStream":
        return self._op(OperatorKind.MAP, "Map", _check(func, MapFunction, "map"), output_type)

    def flat_map(self, func: FlatMapFunction | Callable[[Any], Any], output_type: Any = None) -> "DataStream":
        return self._op(OperatorKind.FLAT_MAP, "FlatMap", _check(func, FlatMapFunction, "flat_map"), output_type)

    def filter(self, func: FilterFunction | Callable[[Any], bool]) -> "DataStream":
        return self._op(OperatorKind.FILTER, "Filter", _check(func, FilterFunction, "filter"))

    def process(self, func: ProcessFunction, output_type: Any = None) -> "DataStream":
        if not isinstance(func, ProcessFunction):
            raise TypeError(f"process expects a ProcessFunction, got {type(func).__name__}")
        return self._op(OperatorKind.PROCESS, "PROCESS", func, output_type)  # PyFlink's operator name

    def assign_timestamps_and_watermarks(self, watermark_strategy: WatermarkStrategy) -> "DataStream":
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise TypeError(f"expected a WatermarkStrategy, got {type(watermark_strategy).__name__}")
        if watermark_strategy.timestamp_assigner is None:
            # PyFlink hands the strategy to Java's assignTimestampsAndWatermarks, which runs at its
            # input's parallelism (the plan shows it there, FORWARD from the input).
            out = self._op(OperatorKind.TIMESTAMPS, "Timestamps/Watermarks", None, None, watermark_strategy=watermark_strategy)
            return out if self._t.kind.is_virtual else out._update(parallelism=self.get_parallelism())
        # A Python assigner is three operators in PyFlink (a Python "Extract-Timestamp" process
        # function, Java's Timestamps/Watermarks, a Java "Remove-Timestamp" map), each with its own
        # transformation id. One operator does all of it here; the plan shows PyFlink's three.
        extract_id = self._env._reserve_id()
        remove_id = self._env._next_id + 1
        out = self._op(
            OperatorKind.TIMESTAMPS, "Timestamps/Watermarks", None, None, watermark_strategy=watermark_strategy,
            plan_extract_id=extract_id, plan_remove_id=remove_id,
        )
        self._env._reserve_id()  # remove_id
        return out

    def get_side_output(self, output_tag: OutputTag) -> "DataStream":
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"get_side_output expects an OutputTag, got {type(output_tag).__name__}")
        params = {"tag_id": output_tag.tag_id, "type_info": output_tag.type_info}
        tid = self._env._add(OperatorKind.SIDE_OUTPUT, f"SideOutput({output_tag.tag_id})", (self._id,), params=params)
        return DataStream(self._env, tid)

    def key_by(self, key_selector: KeySelector | Callable[[Any], Any], key_type: Any = None) -> "KeyedStream":
        selector = key_selector.get_key if isinstance(key_selector, KeySelector) else key_selector
        if not callable(selector):
            raise TypeError("key_by expects a KeySelector or a callable")
        # A declared type whose keys cannot be encoded stably is refused now, not at the first record.
        refuse_unstable_key_type(key_type)
        # The declared key type decides the key's hash, and so its subtask, as in PyFlink.
        plan_map_id = self._env._reserve_id()  # PyFlink's key_by map comes first (the plan shows it)
        tid = self._partition(
            ShipStrategy.HASH, key_selector=selector, params={"key_spec": key_spec(key_type), "plan_map_id": plan_map_id}
        )
        keyed = KeyedStream(self._env, tid, self)
        keyed._key_type = key_type
        return keyed

    def union(self, *streams: "DataStream") -> "DataStream":
        # A KeyedStream joins a union by its records, through its pass-through values map (PyFlink's
        # plan shows that map, and the union's consumer reads it FORWARD, not by key).
        inputs = [s._values() if isinstance(s, KeyedStream) else s for s in streams]
        tid = self._env._add(OperatorKind.UNION, "Union", (self._id, *(s._id for s in inputs)))
        return DataStream(self._env, tid)

    def force_non_parallel(self) -> "DataStream":
        """Pin this operator to parallelism 1 for good (set_parallelism can no longer change it)."""
        return self._update(fixed_parallelism=1, parallelism=1)

    def project(self, *field_indexes: int) -> "DataStream":
        """Keep only the given positions of each tuple, in the given order (Flink's ``project``)."""
        if not field_indexes:
            raise ValueError("project needs at least one field index")
        for i in field_indexes:
            if not isinstance(i, int) or isinstance(i, bool) or i < 0:
                raise TypeError(f"project takes non-negative field positions, got {i!r}")
        declared = self.get_type()
        output_type = None
        if isinstance(declared, TupleTypeInfo):
            fields = declared.get_field_types()
            if max(field_indexes) >= len(fields):
                raise IndexError(f"project: position {max(field_indexes)} is out of range for a {len(fields)}-field tuple")
            output_type = Types.TUPLE([fields[i] for i in field_indexes])
        elif not isinstance(declared, PickledBytesTypeInfo):
            # PyFlink's refusal; an undeclared type is projected at run time (tuples only) instead.
            raise Exception("Only Tuple DataStreams can be projected.")
        return self._op(OperatorKind.MAP, "Projection", aggregators.Projection(tuple(field_indexes)), output_type)

    def get_execution_environment(self) -> "StreamExecutionEnvironment":
        return self._env

    def get_execution_config(self) -> Any:
        return self._env.get_config()

    def set_buffer_timeout(self, timeout_millis: int) -> "DataStream":
        """Accepted for PyFlink programs; Millstream's buffer timeout is per job
        (``env.set_buffer_timeout``), so this one operator keeps the job's."""
        if timeout_millis < -1:
            raise ValueError(f"the buffer timeout must be -1 or more, got {timeout_millis}")
        return self

    def set_uid_hash(self, uid_hash: str) -> "DataStream":
        """Flink's user-provided operator hash; here it names the operator's state on restore as a uid does."""
        return self._update(uid=f"uid-hash:{uid_hash}")

    def partition_custom(self, partitioner: Partitioner | Callable[[Any, int], int], key_selector: Any) -> "DataStream":
        """Each record goes to the subtask ``partitioner.partition(key_selector(record), n)`` names,
        ``n`` being the parallelism of the operator that reads it."""
        if not isinstance(partitioner, Partitioner) and not callable(partitioner):
            raise TypeError("Parameter partitioner should be type of Partitioner or a callable function.")
        if not isinstance(key_selector, KeySelector) and not callable(key_selector):
            raise TypeError("Parameter key_selector should be type of KeySelector or a callable function.")
        route = CustomPartition(
            partitioner.partition if isinstance(partitioner, Partitioner) else partitioner,
            key_selector.get_key if isinstance(key_selector, KeySelector) else key_selector,
            tuple(f for f in (partitioner, key_selector) if isinstance(f, Function)),
        )
        return DataStream(self._env, self._partition(ShipStrategy.CUSTOM, key_selector=route))

    def cache(self) -> "DataStream":
        raise not_supported(
            "DataStream.cache",
            "intermediate results are not kept between jobs",
            "writing the stream with a FileSink and reading it back with FileSource",
        )

    def window_all(self, window_assigner: WindowAssigner) -> AllWindowedStream:
        """Windows over the whole stream (not per key), evaluated at parallelism 1 as in Flink."""
        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: int | None = None) -> AllWindowedStream:
        if slide is None:
            return AllWindowedStream(self, CountTumblingWindowAssigner.of(size))
        # Java Flink's countWindowAll(size, slide): every ``slide`` elements, the last ``size``.
        return AllWindowedStream(self, GlobalWindows.create()).trigger(CountTrigger.of(slide)).evictor(CountEvictor.of(size))

    # -- partitioning ------------------------------------------------------
    def _partition(self, strategy: ShipStrategy, key_selector: Any = None, params: dict[str, Any] | None = None) -> int:
        return self._env._add(
            OperatorKind.PARTITION,
            strategy.value,
            (self._id,),
            ship_strategy=strategy,
            key_selector=key_selector,
            params=params or {},
        )

    def rebalance(self) -> "DataStream":
        return DataStream(self._env, self._partition(ShipStrategy.REBALANCE))

    def rescale(self) -> "DataStream":
        return DataStream(self._env, self._partition(ShipStrategy.RESCALE))

    def shuffle(self) -> "DataStream":
        return DataStream(self._env, self._partition(ShipStrategy.SHUFFLE))

    def broadcast(self, *broadcast_state_descriptors: MapStateDescriptor) -> "DataStream | BroadcastStream":
        """Without descriptors: BROADCAST partitioning. With MapStateDescriptors: a BroadcastStream
        to ``connect`` to, whose elements update broadcast state."""
        stream = DataStream(self._env, self._partition(ShipStrategy.BROADCAST))
        if broadcast_state_descriptors:
            return BroadcastStream(stream, tuple(broadcast_state_descriptors))
        return stream

    def connect(self, ds: "DataStream | BroadcastStream") -> "ConnectedStreams | BroadcastConnectedStream":
        if isinstance(ds, BroadcastStream):
            return BroadcastConnectedStream(self, ds)
        if not isinstance(ds, DataStream):
            raise TypeError(f"connect expects a DataStream or BroadcastStream, got {type(ds).__name__}")
        return ConnectedStreams(self, ds)

    def forward(self) -> "DataStream":
        return DataStream(self._env, self._partition(ShipStrategy.FORWARD))

    # -- sinks ---------------------------------------------------------------
    def print(self, sink_identifier: str | None = None) -> "DataStreamSink":
        type_info = self.get_type()
        # PyFlink first makes untyped records and Rows strings with a map the plan shows.
        plan_map_id = self._env._reserve_id() if converts_to_string(type_info) else None
        tid = self._env._add(
            OperatorKind.SINK,
            "Print to Std. Out",
            (self._id,),
            # The declared type decides the printed form: (a,1) for a tuple, +I[a,1] for a Row...
            params={"sink": "print", "identifier": sink_identifier, "type_info": type_info, "plan_map_id": plan_map_id},
        )
        return DataStreamSink(self._env, tid)

    def add_sink(self, sink_func: SinkFunction | Callable[[Any], Any]) -> "DataStreamSink":
        _check(sink_func, SinkFunction, "add_sink")
        tid = self._env._add(OperatorKind.SINK, "Unnamed", (self._id,), function=sink_func, params={"sink": "function"})
        return DataStreamSink(self._env, tid)

    def sink_to(self, sink: Sink) -> "DataStreamSink":
        if not isinstance(sink, Sink):
            raise TypeError(f"sink_to expects a Sink, got {type(sink).__name__}")
        tid = self._env._add(OperatorKind.SINK, sink.name(), (self._id,), function=sink, params={"sink": "writer"})
        return DataStreamSink(self._env, tid)

    def execute_and_collect(self, job_execution_name: str | None = None, limit: int | None = None):
        """Run the job and iterate over this stream's records as they arrive, as the stream's
        declared type (Row, tuple, list...); with ``limit``, a list of the first ``limit`` records."""
        key = (self._t.key_selector, getattr(self, "_key_type", None)) if isinstance(self, KeyedStream) else None
        source, decode = collect_conversion.prepare(self, key)
        results = self._env._execute_and_collect(source._id, job_execution_name, limit)
        return collect_conversion.converted(results, decode, limit)


KEYED_STREAM_VALUE_OPERATOR_NAME = "_keyed_stream_values_operator"  # PythonConfigUtil's name for it


def _identity(value: Any) -> Any:
    return value


class DataStreamSink(DataStream):
    """The end of a pipeline; only configuration calls make sense on it."""


class KeyedStream(DataStream):
    """A stream partitioned by key: records with the same key meet in one subtask."""

    class AccumulateType(Enum):
        """PyFlink's names for the built-in rolling aggregations (sum/min/max/min_by/max_by)."""

        MIN = 1
        MAX = 2
        MIN_BY = 3
        MAX_BY = 4
        SUM = 5

    def __init__(self, env: "StreamExecutionEnvironment", transformation_id: int, origin: DataStream) -> None:
        super().__init__(env, transformation_id)
        self._origin = origin

    # map/flat_map/filter of a rich function are keyed process functions, as in PyFlink: its keyed
    # state is per key (engine/datastream/keyed_functions.py). Plain callables keep the plain operators.
    def map(self, func: MapFunction | Callable[[Any], Any], output_type: Any = None) -> DataStream:
        if may_use_keyed_state(func):
            return self._op(OperatorKind.KEYED_PROCESS, "Map", KeyedMapAdapter(func), output_type)
        return super().map(func, output_type)

    def flat_map(self, func: FlatMapFunction | Callable[[Any], Any], output_type: Any = None) -> DataStream:
        if may_use_keyed_state(func):
            return self._op(OperatorKind.KEYED_PROCESS, "FlatMap", KeyedFlatMapAdapter(func), output_type)
        return super().flat_map(func, output_type)

    def filter(self, func: FilterFunction | Callable[[Any], bool]) -> DataStream:
        if may_use_keyed_state(func):
            # the records pass unchanged: they keep the keyed stream's type, as PyFlink's filter does
            return self._op(OperatorKind.KEYED_PROCESS, "Filter", KeyedFilterAdapter(func), self.get_type())
        return super().filter(func)

    # PyFlink's refusals for configuring a KeyedStream (a partitioning, not an operator), as TypeErrors.
    def set_parallelism(self, parallelism: int) -> "DataStream":
        raise TypeError("Set parallelism for KeyedStream is not supported.")

    def uid(self, uid: str) -> "DataStream":
        raise TypeError("Set uid for KeyedStream is not supported.")

    def set_uid_hash(self, uid_hash: str) -> "DataStream":
        raise TypeError("Set uid hash for KeyedStream is not supported.")

    def set_max_parallelism(self, max_parallelism: int) -> "DataStream":
        raise TypeError("Set max parallelism for KeyedStream is not supported.")

    def set_buffer_timeout(self, timeout_millis: int) -> "DataStream":
        raise TypeError("Set buffer timeout for KeyedStream is not supported.")

    def start_new_chain(self) -> "DataStream":
        raise TypeError("Start new chain for KeyedStream is not supported.")

    def disable_chaining(self) -> "DataStream":
        raise TypeError("Disable chaining for KeyedStream is not supported.")

    def slot_sharing_group(self, slot_sharing_group: Any) -> "DataStream":
        raise TypeError("Setting slot sharing group for KeyedStream is not supported.")

    def cache(self) -> "DataStream":
        raise TypeError("Cache for KeyedStream is not supported.")

    def partition_custom(self, partitioner: Any, key_selector: Any) -> "DataStream":
        raise Exception("Cannot override partitioning for KeyedStream.")

    def _key_selector_fn(self) -> Any:
        return self._t.key_selector

    def _values(self) -> DataStream:
        """The records without their key partitioning: a pass-through map after the HASH edge,
        named as PyFlink names it."""
        return DataStream.map(self, _identity, output_type=self.get_type()).name(KEYED_STREAM_VALUE_OPERATOR_NAME)

    def union(self, *streams: "DataStream") -> "DataStream":
        return self._values().union(*streams)

    def print(self, sink_identifier: str | None = None) -> "DataStreamSink":
        # PyFlink 2.3 prints a KeyedStream's records through its pass-through values map and drops
        # the identifier on the way (recorded: key_by(...).print("id") prints no "id> " prefix).
        return self._values().print()

    # PyFlink's refusals, word for word: repartitioning a KeyedStream would split its keyed state.
    def shuffle(self) -> "DataStream":
        raise Exception("Cannot override partitioning for KeyedStream.")

    def rebalance(self) -> "DataStream":
        raise Exception("Cannot override partitioning for KeyedStream.")

    def rescale(self) -> "DataStream":
        raise Exception("Cannot override partitioning for KeyedStream.")

    def forward(self) -> "DataStream":
        raise Exception("Cannot override partitioning for KeyedStream.")

    def broadcast(self, *broadcast_state_descriptors: MapStateDescriptor) -> Any:
        raise Exception("Cannot override partitioning for KeyedStream.")

    def force_non_parallel(self) -> "DataStream":
        raise Exception("Set force non-parallel for KeyedStream is not supported.")

    def reduce(self, func: ReduceFunction | Callable[[Any, Any], Any], output_type: Any = None) -> DataStream:
        fn = func.reduce if isinstance(func, ReduceFunction) else func
        if not callable(fn):
            raise TypeError("reduce expects a ReduceFunction or a callable")
        return self._op(OperatorKind.REDUCE, "Reduce", func, output_type)  # PyFlink's name (Java's is "Keyed Reduce")

    # A position (tuples, Rows, lists) or a field name (Rows with names); see aggregators.
    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        return self._op(OperatorKind.REDUCE, "Keyed Aggregation", aggregators.SumAggregator(position_to_sum))

    def min(self, position_to_min: int | str = 0) -> DataStream:
        return self._op(OperatorKind.REDUCE, "Keyed Aggregation", aggregators.MinAggregator(position_to_min))

    def max(self, position_to_max: int | str = 0) -> DataStream:
        return self._op(OperatorKind.REDUCE, "Keyed Aggregation", aggregators.MaxAggregator(position_to_max))

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        return self._op(OperatorKind.REDUCE, "Keyed Aggregation", aggregators.MinByAggregator(position_to_min_by))

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        return self._op(OperatorKind.REDUCE, "Keyed Aggregation", aggregators.MaxByAggregator(position_to_max_by))

    def window(self, window_assigner: WindowAssigner) -> WindowedStream:
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int | None = None) -> WindowedStream:
        if slide is None:
            return WindowedStream(self, CountTumblingWindowAssigner.of(size))
        return WindowedStream(self, CountSlidingWindowAssigner.of(size, slide))

    def process(self, func: KeyedProcessFunction, output_type: Any = None) -> DataStream:  # type: ignore[override]
        if not isinstance(func, KeyedProcessFunction):
            raise TypeError(f"KeyedStream.process expects a KeyedProcessFunction, got {type(func).__name__}")
        return self._op(OperatorKind.KEYED_PROCESS, "KEYED PROCESS", func, output_type)  # PyFlink's operator name
