"""Sink operators: print, user SinkFunctions, Sink writers and execute_and_collect's collector."""
from __future__ import annotations

from typing import Any

from engine.datastream.functions import SinkFunction
from engine.runtime.operators.base import StreamOperator


class PrintSinkOperator(StreamOperator):
    """Flink's print(): prefixes ``<subtask+1>> `` when parallel, ``id:`` with an identifier."""

    def open(self) -> None:
        super().open()
        ident = self.params.get("identifier")
        if self.ctx.parallelism > 1:
            self.prefix = f"{ident}:{self.ctx.subtask + 1}> " if ident else f"{self.ctx.subtask + 1}> "
        else:
            self.prefix = f"{ident}> " if ident else ""

    def process_batch(self, values, timestamps):
        p = self.prefix
        self.ctx.print_line("\n".join(f"{p}{_fmt(v)}" for v in values))


def _fmt(v: Any) -> str:
    # PyFlink prints tuples as Flink's Java tuples would look to a Python user: their repr.
    return str(v)


class _SinkContext:
    def __init__(self) -> None:
        self.ts: int | None = None

    def timestamp(self) -> int | None:
        return self.ts


class FunctionSinkOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        f = self.function
        self.sctx = _SinkContext()
        self.fn = (lambda v: f.invoke(v, self.sctx)) if isinstance(f, SinkFunction) else f

    def process_batch(self, values, timestamps):
        fn = self.fn
        for i, v in enumerate(values):
            if timestamps is not None:
                self.sctx.ts = timestamps[i]
            fn(v)


class WriterSinkOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        self.writer = self.function.create_writer(self.ctx.subtask, self.ctx.parallelism)

    def process_batch(self, values, timestamps):
        w = self.writer
        for v in values:
            w.write(v)

    def end_input(self) -> None:
        self.writer.flush(True)

    def close(self) -> None:
        self.writer.close()
        super().close()


class CollectSinkOperator(StreamOperator):
    """Hands batches to the task environment, which ships them to the client."""

    def open(self) -> None:
        super().open()
        if self.ctx.collect is None:
            raise RuntimeError("this task environment cannot collect results")
        self.node_id = int(self.params["node_id"])

    def process_batch(self, values, timestamps):
        self.ctx.collect(self.node_id, list(values))
