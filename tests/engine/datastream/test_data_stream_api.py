"""PyFlink DataStream API surface added for issue 12: project, force_non_parallel, KeyedStream refusals,
function context types and generic window functions."""
from __future__ import annotations

import pytest

from millstream.engine.datastream.functions import (
    BroadcastProcessFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment


def _env(parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


@pytest.mark.parametrize("method", ["shuffle", "rebalance", "rescale", "forward", "broadcast"])
def test_keyed_stream_refuses_repartitioning_with_pyflinks_message(method):
    keyed = _env().from_collection([1]).key_by(lambda x: x)
    with pytest.raises(Exception, match="^Cannot override partitioning for KeyedStream.$"):
        getattr(keyed, method)()


def test_keyed_stream_refuses_force_non_parallel():
    keyed = _env().from_collection([1]).key_by(lambda x: x)
    with pytest.raises(Exception, match="Set force non-parallel for KeyedStream is not supported."):
        keyed.force_non_parallel()


def test_project_keeps_the_chosen_positions_on_a_real_run():
    env = _env(2)
    ds = env.from_collection([("a", 1, 1.5), ("b", 2, 2.5)])
    assert sorted(ds.project(2, 0).execute_and_collect()) == [(1.5, "a"), (2.5, "b")]
    with pytest.raises(ValueError):
        ds.project()
    with pytest.raises(TypeError):
        ds.project(-1)


def test_project_of_a_non_tuple_fails_the_job_clearly():
    env = _env(1)
    with pytest.raises(Exception, match="Only Tuple DataStreams can be projected"):
        list(env.from_collection(["not a tuple"]).project(0).execute_and_collect())


def test_force_non_parallel_pins_parallelism_one():
    env = _env(4)
    ds = env.from_collection([1, 2, 3]).map(lambda x: x).force_non_parallel()
    assert ds.get_parallelism() == 1
    with pytest.raises(ValueError, match="non-parallel"):
        ds.set_parallelism(2)
    out = ds.map(lambda x: x * 10)
    out.print()
    graph = env.get_stream_graph()
    forced = graph.nodes[ds._id]
    assert forced.parallelism == 1 and forced.fixed_parallelism
    assert graph.nodes[out._id].parallelism == 4
    env2 = _env(4)
    assert sorted(env2.from_collection([1, 2, 3]).map(lambda x: x).force_non_parallel().map(lambda x: x * 10).execute_and_collect()) == [10, 20, 30]


def test_window_functions_are_generic_like_pyflinks():
    class P(ProcessWindowFunction[int, str, str, object]):
        def process(self, key, context, elements):
            return []

    class A(WindowFunction[int, str, str, object]):
        def apply(self, key, window, inputs):
            return []

    assert isinstance(P(), ProcessWindowFunction) and isinstance(A(), WindowFunction)


def test_context_classes_exist_as_pyflinks_do():
    assert issubclass(BroadcastProcessFunction.ReadOnlyContext, BroadcastProcessFunction.ReadOnlyContext)
    for cls in (
        BroadcastProcessFunction.Context,
        BroadcastProcessFunction.ReadOnlyContext,
        KeyedBroadcastProcessFunction.Context,
        KeyedBroadcastProcessFunction.ReadOnlyContext,
        KeyedBroadcastProcessFunction.OnTimerContext,
        KeyedProcessFunction.OnTimerContext,
        KeyedCoProcessFunction.OnTimerContext,
        CoProcessFunction.Context,
    ):
        assert isinstance(cls, type)
    assert issubclass(KeyedBroadcastProcessFunction.OnTimerContext, KeyedBroadcastProcessFunction.ReadOnlyContext)


def test_broadcast_contexts_at_runtime_are_instances_of_the_declared_types():
    from millstream.engine.datastream.state import MapStateDescriptor

    desc = MapStateDescriptor("rules", None, None)

    class B(BroadcastProcessFunction):
        def process_element(self, value, ctx):
            yield ("element", isinstance(ctx, BroadcastProcessFunction.ReadOnlyContext),
                   isinstance(ctx, BroadcastProcessFunction.Context))

        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(desc)["rule"] = value  # the mapping protocol on broadcast state
            yield ("broadcast", isinstance(ctx, BroadcastProcessFunction.Context), "rule" in ctx.get_broadcast_state(desc))

    class K(KeyedBroadcastProcessFunction):
        def process_element(self, value, ctx):
            yield ("keyed", isinstance(ctx, KeyedBroadcastProcessFunction.ReadOnlyContext), ctx.get_current_key())

        def process_broadcast_element(self, value, ctx):
            yield ("keyed-broadcast", isinstance(ctx, KeyedBroadcastProcessFunction.Context))

    env = _env(1)
    rules = env.from_collection(["r"]).broadcast(desc)
    a = env.from_collection(["v"]).connect(rules).process(B())
    b = env.from_collection(["k"]).key_by(lambda x: x).connect(env.from_collection(["r"]).broadcast(desc)).process(K())
    assert sorted(a.union(b).execute_and_collect()) == [
        ("broadcast", True, True), ("element", True, False), ("keyed", True, "k"), ("keyed-broadcast", True)
    ]


def test_project_follows_the_declared_tuple_type_and_refuses_other_declared_types():
    from millstream.engine.common.typeinfo import TupleTypeInfo, Types

    env = _env(1)
    typed = env.from_collection([("a", 1, 2.0)], type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.DOUBLE()]))
    projected = typed.project(2, 0)
    out_type = projected.get_type()
    assert isinstance(out_type, TupleTypeInfo) and out_type.get_field_types() == [Types.DOUBLE(), Types.STRING()]
    with pytest.raises(IndexError):
        typed.project(3)
    rows = env.from_collection([("a", 1)], type_info=Types.ROW([Types.STRING(), Types.INT()]))
    with pytest.raises(Exception, match="Only Tuple DataStreams can be projected."):
        rows.project(0)
