"""The DataStream API: what each call records, and what it refuses."""
from __future__ import annotations

import pytest

from millstream.engine.datastream import (
    KeyedProcessFunction,
    KeyedStream,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    StreamExecutionEnvironment,
)
from millstream.engine.datastream.aggregators import MaxByAggregator, MinAggregator, SumAggregator
from millstream.engine.datastream.connectors import NumberSequenceSource
from millstream.engine.graph.transformations import ChainingStrategy, OperatorKind, ShipStrategy


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment().set_parallelism(parallelism)


def _seq(env):
    return env.from_source(NumberSequenceSource(1, 10))


def _last(env):
    return env._transformations[max(env._transformations)]


def test_each_call_appends_one_immutable_transformation_with_its_input():
    env = _env()
    s = _seq(env)
    m = s.map(str)
    t = _last(env)
    assert t.kind is OperatorKind.MAP and t.inputs == (s._id,)
    m.name("renamed")
    assert env._transformations[m._id] is not t  # replaced, not mutated
    assert t.name == "Map" and m.get_name() == "renamed"


@pytest.mark.parametrize(
    ("call", "kind", "name"),
    [
        (lambda s: s.map(str), OperatorKind.MAP, "Map"),
        (lambda s: s.flat_map(lambda v: [v]), OperatorKind.FLAT_MAP, "FlatMap"),
        (lambda s: s.filter(bool), OperatorKind.FILTER, "Filter"),
        (lambda s: s.process(ProcessFunction()), OperatorKind.PROCESS, "PROCESS"),
        (lambda s: s.key_by(str).reduce(lambda a, b: a), OperatorKind.REDUCE, "Reduce"),
        (lambda s: s.key_by(str).sum(0), OperatorKind.REDUCE, "Keyed Aggregation"),
        (lambda s: s.key_by(str).process(KeyedProcessFunction()), OperatorKind.KEYED_PROCESS, "KEYED PROCESS"),
        (lambda s: s.print(), OperatorKind.SINK, "Print to Std. Out"),
        (lambda s: s.add_sink(print), OperatorKind.SINK, "Unnamed"),
    ],
)
def test_operator_kinds_and_default_names(call, kind, name):
    env = _env()
    call(_seq(env))
    t = _last(env)
    assert (t.kind, t.name) == (kind, name)


def test_function_objects_and_callables_are_both_accepted():
    class Upper(MapFunction):
        def map(self, value):
            return str(value).upper()

    env = _env()
    fn = Upper()
    _seq(env).map(fn)
    assert _last(env).function is fn


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.map(42),
        lambda s: s.flat_map("x"),
        lambda s: s.filter(None),
        lambda s: s.process(lambda v: v),
        lambda s: s.key_by(3),
        lambda s: s.key_by(str).reduce(1),
        lambda s: s.key_by(str).process(ProcessFunction()),
        lambda s: s.add_sink(5),
        lambda s: s.sink_to(print),
    ],
)
def test_wrong_function_types_raise_type_error(call):
    env = _env()
    with pytest.raises(TypeError):
        call(_seq(env))


def test_key_by_records_a_hash_partition_with_the_selector():
    class ByParity(KeySelector):
        def get_key(self, value):
            return value % 2

    env = _env()
    selector = ByParity()
    keyed = _seq(env).key_by(selector)
    assert isinstance(keyed, KeyedStream)
    t = _last(env)
    assert t.kind is OperatorKind.PARTITION and t.ship_strategy is ShipStrategy.HASH
    assert t.key_selector(7) == 1  # a KeySelector is stored as its bound get_key


@pytest.mark.parametrize("call", [lambda k: k.set_parallelism(2), lambda k: k.name("x"), lambda k: k.uid("x")])
def test_a_keyed_stream_cannot_be_configured(call):
    env = _env()
    with pytest.raises(TypeError):
        call(_seq(env).key_by(str))


@pytest.mark.parametrize("strategy", ["rebalance", "rescale", "shuffle", "broadcast", "forward"])
def test_partitioning_calls_record_their_ship_strategy(strategy):
    env = _env()
    getattr(_seq(env), strategy)()
    t = _last(env)
    assert t.kind is OperatorKind.PARTITION and t.ship_strategy is ShipStrategy(strategy.upper())
    with pytest.raises(TypeError):
        getattr(_seq(env), strategy)().name("x")


def test_union_records_all_inputs():
    env = _env()
    a, b, c = _seq(env), _seq(env), _seq(env)
    a.union(b, c)
    t = _last(env)
    assert t.kind is OperatorKind.UNION and t.inputs == (a._id, b._id, c._id)


@pytest.mark.parametrize(
    ("method", "cls"), [("sum", SumAggregator), ("min", MinAggregator), ("max_by", MaxByAggregator)]
)
def test_keyed_aggregations_use_the_built_in_reducers(method, cls):
    env = _env()
    getattr(_seq(env).key_by(str), method)(1)
    fn = _last(env).function
    assert isinstance(fn, cls) and fn.position == 1


def test_keyed_reduce_accepts_a_reduce_function():
    class Add(ReduceFunction):
        def reduce(self, a, b):
            return a + b

    env = _env()
    fn = Add()
    _seq(env).key_by(str).reduce(fn)
    assert _last(env).function is fn


def test_chaining_controls_set_the_strategy():
    env = _env()
    m = _seq(env).map(str)
    assert _last(env).chaining is ChainingStrategy.ALWAYS
    m.start_new_chain()
    assert env._transformations[m._id].chaining is ChainingStrategy.HEAD
    m.disable_chaining()
    assert env._transformations[m._id].chaining is ChainingStrategy.NEVER


@pytest.mark.parametrize("bad", [0, -1])
def test_parallelism_below_one_raises(bad):
    env = _env()
    with pytest.raises(ValueError):
        _seq(env).map(str).set_parallelism(bad)


def test_parallelism_get_and_set():
    env = _env(3)
    m = _seq(env).map(str)
    assert m.get_parallelism() == 3
    assert m.set_parallelism(5).get_parallelism() == 5


def test_uid_and_name_are_recorded():
    env = _env()
    m = _seq(env).map(str).uid("the-map").name("The Map")
    t = env._transformations[m._id]
    assert (t.uid, t.name) == ("the-map", "The Map")


def test_pyflink_compat_calls_are_accepted_and_return_the_stream():
    env = _env()
    m = _seq(env).map(str)
    assert m.slot_sharing_group("x") is m
    assert m.set_description("d") is m
