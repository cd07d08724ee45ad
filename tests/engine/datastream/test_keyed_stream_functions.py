"""KeyedStream.map/flat_map/filter: a rich function (one with open()) becomes a keyed process
function named as in PyFlink, so its keyed state is per key on both engines; plain callables keep
the plain operators. What they compute is checked in-process here and against PyFlink in the
x_runtime_keyed_functions_state conformance program."""
from __future__ import annotations

import pytest

from millstream.engine.common.typeinfo import Types
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.functions import FilterFunction, FlatMapFunction, MapFunction, RuntimeContext
from millstream.engine.datastream.keyed_functions import KeyedFilterAdapter, KeyedFlatMapAdapter, KeyedMapAdapter
from millstream.engine.datastream.state import ValueStateDescriptor
from millstream.engine.graph.transformations import OperatorKind


class Seen(MapFunction, FlatMapFunction, FilterFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", None))

    def _step(self, value):
        n = (self.seen.value() or 0) + 1
        self.seen.update(n)
        return n

    def map(self, value):
        return (value[0], self._step(value))

    def flat_map(self, value):
        n = self._step(value)
        return [(value[0], n)] * (1 if n == 1 else 0)

    def filter(self, value):
        return self._step(value) == 2


def _keyed():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    ds = env.from_collection([("a", 1), ("b", 2), ("a", 3), ("a", 4), ("b", 5)],
                             type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    return env, ds.key_by(lambda v: v[0])


@pytest.mark.parametrize(
    ("method", "adapter", "name"),
    [("map", KeyedMapAdapter, "Map"), ("flat_map", KeyedFlatMapAdapter, "FlatMap"), ("filter", KeyedFilterAdapter, "Filter")],
)
def test_a_rich_function_becomes_a_keyed_process_named_as_in_pyflink(method, adapter, name) -> None:
    env, keyed = _keyed()
    out = getattr(keyed, method)(Seen())
    t = env._transformations[out._id]
    assert t.kind is OperatorKind.KEYED_PROCESS and t.name == name and isinstance(t.function, adapter)


def test_plain_callables_keep_the_plain_operators() -> None:
    env, keyed = _keyed()
    kinds = [env._transformations[s._id].kind for s in (keyed.map(str), keyed.flat_map(list), keyed.filter(bool))]
    assert kinds == [OperatorKind.MAP, OperatorKind.FLAT_MAP, OperatorKind.FILTER]


def test_a_keyed_filter_keeps_the_stream_type() -> None:
    env, keyed = _keyed()
    assert keyed.filter(Seen()).get_type() == keyed.get_type()


def test_keyed_state_is_per_key_in_process() -> None:
    _, keyed = _keyed()
    assert sorted(keyed.map(Seen()).execute_and_collect()) == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)]
    _, keyed = _keyed()
    assert sorted(keyed.flat_map(Seen()).execute_and_collect()) == [("a", 1), ("b", 1)]
    _, keyed = _keyed()
    assert sorted(keyed.filter(Seen()).execute_and_collect()) == [("a", 3), ("b", 5)]
