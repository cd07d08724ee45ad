"""Per-partition logic of each operator kind on Spark: plain functions over iterators.

Every builder returns ``run(index, iterator)`` for ``RDD.mapPartitionsWithIndex``
(sinks consume and return nothing). Nothing here imports PySpark, so the
logic runs on plain lists in tests, and it reuses the native operators'
helpers so that both engines treat user functions alike.
"""
from __future__ import annotations

import sys
import time
from itertools import chain
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from millstream.engine.datastream.connectors.source import Source
from millstream.engine.datastream.functions import (
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    TimeDomain,
    TimerService,
)
from millstream.engine.runtime.key_groups import assign_to_key_group
from millstream.engine.runtime.operators.basic import _extend
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.watermarks import MIN_WATERMARK, NO_TIMESTAMP
from millstream.engine.spark import print_stream  # noqa: F401  (in a Spark worker: printed lines reach the job's stream)
from millstream.engine.spark.timer_service import BatchTimerService
from millstream.engine.spark.timestamps import NO_STAMPS, Stamping

try:  # side outputs are being added to the engine in parallel
    from millstream.engine.datastream.output_tag import OutputTag
except ImportError:  # pragma: no cover
    OutputTag = None  # type: ignore[assignment,misc]

PartitionFn = Callable[[int, Iterator[Any]], Iterator[Any]]
#: a keyed record after the sorted shuffle: (sort key, (key, value, timestamp)), where the sort key is
#: (key group, upstream partition, position), or (key group, timestamp, upstream partition, position)
SortedKeyedRecord = tuple[tuple[int, ...], tuple[Any, Any, "int | None"]]


@dataclass(frozen=True)
class TaskInfo:
    """What a function may learn about the parallel instance it runs in."""

    vertex_name: str  # the JobVertex holding the operator, as the native runtime names tasks
    operator_name: str
    parallelism: int
    max_parallelism: int
    job_parameters: dict[str, str] = field(default_factory=dict)
    key_spec: Any = None  # a keyed operator's key type (engine.common.key_spec): it decides key groups


def current_partition() -> int:
    """The Spark partition (the parallel instance) running this code; 0 outside a Spark task."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - PySpark is always there on an executor
        return 0
    tc = TaskContext.get()
    return tc.partitionId() if tc is not None else 0


def _attempt_number() -> int:
    # Spark's task attempt plays the part of Flink's attempt; absent outside a Spark task.
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - PySpark is always there on an executor
        return 0
    tc = TaskContext.get()
    return tc.attemptNumber() if tc is not None else 0


class SparkRuntimeContext(RuntimeContext):
    def __init__(self, info: TaskInfo, index: int, backend: HeapKeyedStateBackend | None = None) -> None:
        self.info = info
        self.index = index
        self.backend = backend
        self.attempt = _attempt_number()

    def get_task_name(self) -> str:
        return f"{self.info.vertex_name} ({self.index + 1}/{self.info.parallelism})#{self.attempt}"

    def get_number_of_parallel_subtasks(self) -> int:
        return self.info.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self.info.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self.index

    def get_attempt_number(self) -> int:
        return self.attempt

    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None:
        return self.info.job_parameters.get(key, default_value)

    def _backend(self) -> HeapKeyedStateBackend:
        if self.backend is None:
            raise TypeError(
                f"keyed state is only available on a keyed stream; '{self.info.operator_name}' is not keyed"
            )
        return self.backend

    def get_state(self, state_descriptor):
        return self._backend().get_state(state_descriptor)

    def get_list_state(self, state_descriptor):
        return self._backend().get_list_state(state_descriptor)

    def get_map_state(self, state_descriptor):
        return self._backend().get_map_state(state_descriptor)


def _open(fn: Any, info: TaskInfo, index: int, backend: HeapKeyedStateBackend | None = None) -> None:
    if isinstance(fn, Function):
        fn.open(SparkRuntimeContext(info, index, backend))


def _close(fn: Any) -> None:
    if isinstance(fn, Function):
        fn.close()


# -- sources -------------------------------------------------------------------
def source_reader_partition(source: Source, parallelism: int) -> PartitionFn:
    """Any bounded Source: partition i reads the split the native subtask i would read."""

    def run(index: int, _: Iterator[Any]) -> Iterator[Any]:
        reader = source.create_reader(index, parallelism, None)
        try:
            while True:
                batch = reader.poll_batch(1024)
                if batch is None:
                    return
                if not batch:
                    time.sleep(0.01)  # nothing ready yet; a bounded source will end
                yield from batch
        finally:
            reader.close()

    return run


def generator_partition(generator: Callable[[int], Any], per_second: float | None, parallelism: int) -> PartitionFn:
    """DataGeneratorSource over the indices of ``sc.range``, keeping its rate limit per partition."""
    per_partition = per_second / parallelism if per_second else None

    def run(index: int, indices: Iterator[int]) -> Iterator[Any]:
        if per_partition is None:
            yield from map(generator, indices)
            return
        started, emitted = time.monotonic(), 0
        for i in indices:
            ahead = emitted / per_partition - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
            yield generator(i)
            emitted += 1

    return run


# -- one-input operators -----------------------------------------------------------
# With ``stamped`` the records are (value, timestamp) pairs and outputs keep their input's timestamp.
def map_partition(fn: Any, info: TaskInfo, stamped: bool = False) -> PartitionFn:
    if not stamped and not isinstance(fn, Function):

        def run_plain(index: int, it: Iterator[Any]) -> Iterator[Any]:
            return map(fn, it)  # no open()/close(), so no generator step per record

        return run_plain

    def run(index: int, it: Iterator[Any]) -> Iterator[Any]:
        _open(fn, info, index)
        call = fn.map if isinstance(fn, MapFunction) else fn
        try:
            if stamped:
                for v, ts in it:
                    yield call(v), ts
            else:
                yield from map(call, it)
        finally:
            _close(fn)

    return run


def _flat_results(fn_results: Iterable[Any]) -> Iterator[Any]:
    """A flat_map function's results under the native rules: None is nothing, a str is an error."""
    for r in fn_results:
        if r is None:
            continue
        if isinstance(r, (str, bytes)):
            raise TypeError("a flat_map/process function must return an iterable of records, not a string")
        yield r


def flat_map_partition(fn: Any, info: TaskInfo, stamped: bool = False) -> PartitionFn:
    if not stamped and not isinstance(fn, Function):
        # A plain callable has no open()/close(): a C-level chain takes no Python step per output record.
        def run_plain(index: int, it: Iterator[Any]) -> Iterator[Any]:
            return chain.from_iterable(_flat_results(map(fn, it)))

        return run_plain

    def run(index: int, it: Iterator[Any]) -> Iterator[Any]:
        _open(fn, info, index)
        call = fn.flat_map if isinstance(fn, FlatMapFunction) else fn
        try:
            if stamped:
                for v, ts in it:
                    out: list[Any] = []
                    _extend(out, call(v))
                    for o in out:
                        yield o, ts
            else:
                yield from chain.from_iterable(_flat_results(map(call, it)))
        finally:
            _close(fn)

    return run


def filter_partition(fn: Any, info: TaskInfo, stamped: bool = False) -> PartitionFn:
    def run(index: int, it: Iterator[Any]) -> Iterator[Any]:
        _open(fn, info, index)
        call = fn.filter if isinstance(fn, FilterFunction) else fn
        try:
            if stamped:
                yield from (p for p in it if call(p[0]))
            else:
                yield from filter(call, it)
        finally:
            _close(fn)

    return run


class _NoTimers(TimerService):
    """A non-keyed ProcessFunction has no timers, as natively."""

    def __init__(self, why: str) -> None:
        self.why = why

    def current_processing_time(self) -> int:
        return int(time.time() * 1000)

    def current_watermark(self) -> int:
        return -(2**63)

    def _refuse(self, *_: Any) -> None:
        raise NotImplementedError(self.why)

    register_processing_time_timer = _refuse  # type: ignore[assignment]
    register_event_time_timer = _refuse  # type: ignore[assignment]
    delete_processing_time_timer = _refuse  # type: ignore[assignment]
    delete_event_time_timer = _refuse  # type: ignore[assignment]


def _results(result: Any) -> list[Any]:
    """A process function's main-output records, by the native rules.

    None is nothing and a string is an error (``_extend``). ``(OutputTag, value)``
    pairs are side outputs; jobs that consume side outputs are refused before
    they get here, so these pairs have no reader and are dropped, as natively.
    """
    out: list[Any] = []
    _extend(out, result)
    if OutputTag is not None:
        out = [r for r in out if not (type(r) is tuple and len(r) == 2 and isinstance(r[0], OutputTag))]
    return out


class _ProcessContext(ProcessFunction.Context):
    def __init__(self) -> None:
        self.timers = _NoTimers("timers can only be used on a keyed stream (key_by(...).process(...))")
        self.ts: int | None = None

    def timestamp(self) -> int:
        # PyFlink hands Python functions StreamRecord.getTimestamp(): Long.MIN_VALUE without one.
        return NO_TIMESTAMP if self.ts is None else self.ts

    def timer_service(self) -> TimerService:
        return self.timers

    def output(self, output_tag: Any, value: Any) -> None:
        pass  # side outputs with a reader are refused before the job runs; unread ones are dropped natively too


def _emit(results: list[Any], ts: int | None, stamped: bool) -> list[Any]:
    return [(r, ts) for r in results] if stamped else results


def process_partition(fn: ProcessFunction, info: TaskInfo, stamping: Stamping = NO_STAMPS) -> PartitionFn:
    def run(index: int, it: Iterator[Any]) -> Iterator[Any]:
        _open(fn, info, index)
        ctx = _ProcessContext()
        try:
            for record in it:
                v, ctx.ts = record if stamping.input else (record, None)
                yield from _emit(_results(fn.process_element(v, ctx)), ctx.ts, stamping.output)
        finally:
            _close(fn)

    return run


# -- keyed operators ------------------------------------------------------------------
class KeyPartitioner:
    """Key -> the parallel instance owning its key group, exactly as the native HASH edge routes it."""

    def __init__(self, max_parallelism: int, parallelism: int, key_spec: Any = None) -> None:
        self.max_parallelism = max_parallelism
        self.parallelism = parallelism
        self.key_spec = key_spec

    def __call__(self, key: Any) -> int:
        return assign_to_key_group(key, self.max_parallelism, self.key_spec) * self.parallelism // self.max_parallelism


class SortKeyPartitioner:
    """Routes a sort key ``(key group, ...)`` to the instance owning that key group."""

    def __init__(self, max_parallelism: int, parallelism: int) -> None:
        self.max_parallelism = max_parallelism
        self.parallelism = parallelism

    def __call__(self, sort_key: tuple[int, int, int]) -> int:
        return sort_key[0] * self.parallelism // self.max_parallelism


def sort_keyed_partition(
    key_selector: Callable[[Any], Any],
    max_parallelism: int,
    stamped: bool = False,
    by_timestamp: bool = False,
    key_spec: Any = None,
) -> PartitionFn:
    """Tags each record with a sort key that groups by key group and orders records within a key.

    The order is Flink's BATCH order: by timestamp when ``by_timestamp`` (records
    without one come first), then input order.
    """

    def run(index: int, it: Iterator[Any]) -> Iterator[SortedKeyedRecord]:
        for position, record in enumerate(it):
            v, ts = record if stamped else (record, None)
            k = key_selector(v)
            group = assign_to_key_group(k, max_parallelism, key_spec)
            if by_timestamp:
                yield (group, MIN_WATERMARK if ts is None else ts, index, position), (k, v, ts)
            else:
                yield (group, index, position), (k, v, ts)

    return run


def records_by_key(it: Iterator[SortedKeyedRecord]) -> Iterator[tuple[Any, list[tuple[Any, int | None]]]]:
    """Each key with its (value, timestamp) records in sorted order, one key group in memory at a time."""
    current_group: int | None = None
    keys: dict[Any, list[tuple[Any, int | None]]] = {}
    for sort_key, (k, v, ts) in it:
        if sort_key[0] != current_group:
            yield from keys.items()
            keys = {}
            current_group = sort_key[0]
        records = keys.get(k)
        if records is None:
            keys[k] = [(v, ts)]
        else:
            records.append((v, ts))
    yield from keys.items()


class _KeyedContext(KeyedProcessFunction.OnTimerContext):
    def __init__(self, backend: HeapKeyedStateBackend, timers: BatchTimerService) -> None:
        self.backend = backend
        self.timers = timers
        self.ts: int | None = None
        self.domain: TimeDomain | None = None

    def timestamp(self) -> int:
        # PyFlink hands Python functions StreamRecord.getTimestamp(): Long.MIN_VALUE without one.
        return NO_TIMESTAMP if self.ts is None else self.ts

    def timer_service(self) -> TimerService:
        return self.timers

    def get_current_key(self) -> Any:
        return self.backend.current_key

    def time_domain(self) -> TimeDomain | None:
        return self.domain

    def output(self, output_tag: Any, value: Any) -> None:
        pass  # as _ProcessContext.output


def keyed_process_partition(fn: KeyedProcessFunction, info: TaskInfo, stamped_output: bool = False) -> PartitionFn:
    """Flink's BATCH execution of a KeyedProcessFunction over records sorted by key.

    One key at a time: its records in order, then its timers (``BatchTimerService``).
    Keyed state lives in a heap backend and is dropped when the key is done,
    since in BATCH no record of that key can follow. Records keep their
    timestamp; event-time timer output carries the timer's time, and
    processing-time timer output none, as natively.
    """

    def run(index: int, it: Iterator[SortedKeyedRecord]) -> Iterator[Any]:
        backend = HeapKeyedStateBackend(info.max_parallelism, key_spec=info.key_spec)
        _open(fn, info, index, backend)
        timers = BatchTimerService()
        ctx = _KeyedContext(backend, timers)
        try:
            for key, records in records_by_key(it):
                backend.current_key = key
                ctx.domain = None
                for v, ctx.ts in records:
                    yield from _emit(_results(fn.process_element(v, ctx)), ctx.ts, stamped_output)
                for ts, domain in timers.end_of_key():
                    ctx.domain = domain
                    ctx.ts = ts if domain is TimeDomain.EVENT_TIME else None
                    yield from _emit(_results(fn.on_timer(ts, ctx)), ctx.ts, stamped_output)
                for table in backend.tables.values():
                    table.clear()  # in place: state objects hold these dicts
        finally:
            _close(fn)

    return run


def keyed_reduce_partition(fn: Any, info: TaskInfo, stamped_output: bool = False) -> PartitionFn:
    """Flink's BATCH keyed reduce of a function that opens with a runtime context: over records
    sorted by key, each key's records are reduced with that key current in a heap backend (its
    keyed state is per key, as natively), and only the final value per key is emitted."""
    call = fn.reduce if isinstance(fn, ReduceFunction) else fn

    def run(index: int, it: Iterator[SortedKeyedRecord]) -> Iterator[Any]:
        backend = HeapKeyedStateBackend(info.max_parallelism, key_spec=info.key_spec)
        _open(fn, info, index, backend)
        try:
            for key, records in records_by_key(it):
                backend.current_key = key
                first = True
                acc: Any = None
                for v, _ts in records:
                    acc = v if first else call(acc, v)
                    first = False
                if not first:
                    yield from _emit([acc], None, stamped_output)
                for table in backend.tables.values():
                    table.clear()  # in place: state objects hold these dicts
        finally:
            _close(fn)

    return run


# -- sinks ------------------------------------------------------------------------------
def print_prefix(identifier: str | None, index: int, parallelism: int) -> str:
    """Flink's print(): ``<subtask+1>> `` when parallel, ``id:`` with an identifier."""
    if parallelism > 1:
        return f"{identifier}:{index + 1}> " if identifier else f"{index + 1}> "
    return f"{identifier}> " if identifier else ""


def print_partition(
    identifier: str | None,
    parallelism: int,
    write: Callable[[str], Any] | None = None,
    fmt: Callable[[Any], str] = str,  # the stream's print form (engine/common/type_formatting.py)
) -> Callable[[int, Iterable[Any]], None]:
    def run(index: int, it: Iterable[Any]) -> None:
        # In a Spark task: the executor's stdout and the job's print stream.
        out = write or print_stream.task_print_writer()
        prefix = print_prefix(identifier, index, parallelism)
        lines: list[str] = []
        for v in it:
            lines.append(f"{prefix}{fmt(v)}\n")
            if len(lines) >= 1024:
                out("".join(lines))
                lines = []
        if lines:
            out("".join(lines))
        sys.stdout.flush()

    return run


class _SinkContext:
    def __init__(self) -> None:
        self.ts: int | None = None

    def timestamp(self) -> int | None:
        return self.ts


def sink_function_partition(fn: Any, info: TaskInfo, stamped: bool = False) -> Callable[[int, Iterable[Any]], None]:
    def run(index: int, it: Iterable[Any]) -> None:
        _open(fn, info, index)
        try:
            if isinstance(fn, SinkFunction):
                ctx = _SinkContext()
                for record in it:
                    v, ctx.ts = record if stamped else (record, None)
                    fn.invoke(v, ctx)
            else:
                for record in it:
                    fn(record[0] if stamped else record)
        finally:
            _close(fn)

    return run

