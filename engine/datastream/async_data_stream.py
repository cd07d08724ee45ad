"""``pyflink.datastream.async_data_stream``: ``AsyncDataStream``, Flink's asynchronous I/O.

Each helper adds an async wait operator (``millstream.engine.runtime.operators.async_wait``) after a stream:
an AsyncFunction's coroutine runs for every record, with up to ``capacity`` calls in flight per
subtask, results in input order (``ordered_wait``) or as they complete (``unordered_wait``), a
timeout per record and an optional retry strategy. In-flight records are checkpointed.
"""
from __future__ import annotations

import inspect
from typing import Any

from millstream.engine.datastream import async_retry_strategies
from millstream.engine.datastream.data_stream import DataStream
from millstream.engine.datastream.functions import AsyncFunction, AsyncFunctionDescriptor, AsyncRetryStrategy
from millstream.engine.graph.transformations import OperatorKind

__all__ = ["AsyncDataStream"]

OPERATOR_NAME = "async wait operator"  # what PyFlink names the transformation


class AsyncDataStream:
    """Applies an AsyncFunction to a DataStream."""

    @staticmethod
    def unordered_wait(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Any,
        capacity: int = 100,
        output_type: Any = None,
    ) -> DataStream:
        """Results leave as their calls complete (never across a watermark)."""
        return AsyncDataStream.unordered_wait_with_retry(
            data_stream, async_function, timeout, async_retry_strategies.NO_RETRY_STRATEGY, capacity, output_type
        )

    @staticmethod
    def unordered_wait_with_retry(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Any,
        async_retry_strategy: AsyncRetryStrategy,
        capacity: int = 100,
        output_type: Any = None,
    ) -> DataStream:
        return AsyncDataStream._add(
            data_stream, async_function, timeout, async_retry_strategy, capacity, output_type,
            AsyncFunctionDescriptor.OutputMode.UNORDERED,
        )

    @staticmethod
    def ordered_wait(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Any,
        capacity: int = 100,
        output_type: Any = None,
    ) -> DataStream:
        """Results leave in the order of their input records."""
        return AsyncDataStream.ordered_wait_with_retry(
            data_stream, async_function, timeout, async_retry_strategies.NO_RETRY_STRATEGY, capacity, output_type
        )

    @staticmethod
    def ordered_wait_with_retry(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Any,
        async_retry_strategy: AsyncRetryStrategy,
        capacity: int = 100,
        output_type: Any = None,
    ) -> DataStream:
        return AsyncDataStream._add(
            data_stream, async_function, timeout, async_retry_strategy, capacity, output_type,
            AsyncFunctionDescriptor.OutputMode.ORDERED,
        )

    @staticmethod
    def _add(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Any,
        strategy: AsyncRetryStrategy,
        capacity: int,
        output_type: Any,
        mode: AsyncFunctionDescriptor.OutputMode,
    ) -> DataStream:
        timeout_ms = AsyncDataStream._validate(data_stream, async_function, timeout, strategy, capacity)
        descriptor = AsyncFunctionDescriptor(async_function, timeout, capacity, strategy, mode)
        return data_stream._op(
            OperatorKind.ASYNC_WAIT,
            OPERATOR_NAME,
            async_function,
            output_type,
            timeout_ms=timeout_ms,
            capacity=int(capacity),
            ordered=descriptor.output_mode is AsyncFunctionDescriptor.OutputMode.ORDERED,
            retry_strategy=strategy,
        )

    @staticmethod
    def _validate(data_stream: Any, fn: Any, timeout: Any, strategy: Any, capacity: Any) -> int:
        """The checks PyFlink makes (with its messages), plus capacity; returns the timeout in ms."""
        if not isinstance(data_stream, DataStream):
            raise TypeError(f"AsyncDataStream expects a DataStream, got {type(data_stream).__name__}")
        if not inspect.iscoroutinefunction(getattr(fn, "async_invoke", None)):
            raise Exception(
                "Method 'async_invoke' of class '%s' should be declared as 'async def'." % type(fn)
            )
        if strategy is None:
            raise Exception("Async retry strategy should not be None.")
        to_ms = getattr(timeout, "to_milliseconds", None)
        if to_ms is None:
            raise TypeError(f"timeout must be a Time or Duration, got {type(timeout).__name__}")
        timeout_ms = int(to_ms())
        if strategy is not async_retry_strategies.NO_RETRY_STRATEGY and timeout_ms <= 0:
            raise Exception("Timeout should be configured when do async with retry.")
        if strategy.get_retry_predicate() is None:
            raise Exception("Retry predicate of the async retry strategy '%s' is None." % type(strategy))
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        return timeout_ms
