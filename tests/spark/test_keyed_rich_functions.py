"""Rich map/flat_map/filter functions after key_by keep keyed state per key on Spark as natively:
KeyedStream runs them as keyed process functions, which Spark executes key by key (issue 12)."""
from __future__ import annotations

from typing import Any

from millstream.engine.datastream.functions import FilterFunction, FlatMapFunction, MapFunction, RuntimeContext
from millstream.engine.datastream.state import ValueStateDescriptor
from tests.spark.conftest import run_native, run_spark

DATA = [("a", "x"), ("b", "y"), ("a", "z"), ("c", "w"), ("b", "v"), ("a", "u"), ("c", "t"), ("d", "s")]


class PerKey(MapFunction, FlatMapFunction, FilterFunction):
    """Counts each key's records in ValueState; a new key starts from None."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", None))

    def _next(self) -> int:
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        return n

    def map(self, value):
        return ("map", value[0], self._next())

    def flat_map(self, value):
        if self._next() == 1:
            yield ("first", value[0])

    def filter(self, value):
        return self._next() % 2 == 0


def program(env: Any):
    keyed = lambda: env.from_collection(DATA).key_by(lambda v: v[0])  # noqa: E731
    return keyed().map(PerKey()).union(
        keyed().flat_map(PerKey()), keyed().filter(PerKey()).map(lambda v: ("second", v[0]))
    )


def test_keyed_state_of_rich_functions_is_per_key_on_spark_as_natively(sc) -> None:
    native = sorted(run_native(program, 2))
    spark = sorted(run_spark(sc, program, 2))
    assert spark == native
    assert [r for r in spark if r[0] == "map" and r[1] == "a"] == [("map", "a", 1), ("map", "a", 2), ("map", "a", 3)]
    assert sorted(r[1] for r in spark if r[0] == "first") == ["a", "b", "c", "d"]
    assert sorted(r[1] for r in spark if r[0] == "second") == ["a", "b", "c"]
