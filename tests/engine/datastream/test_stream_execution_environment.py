"""StreamExecutionEnvironment: settings, sources and the JobGraph it builds (never executed)."""
from __future__ import annotations

import pytest

from millstream.engine.common.configuration import Configuration
from millstream.engine.datastream import SourceFunction, StreamExecutionEnvironment
from millstream.engine.datastream.connectors import NumberSequenceSource
from millstream.engine.datastream.connectors.collection import CollectionSource


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment().set_parallelism(parallelism)


def test_defaults():
    env = StreamExecutionEnvironment()
    assert env.get_parallelism() == 1
    assert env.get_max_parallelism() == 128
    assert env.get_buffer_timeout() == 10
    assert env.is_chaining_enabled()


def test_parallelism_default_comes_from_the_configuration():
    env = StreamExecutionEnvironment(Configuration().set_integer("parallelism.default", 3))
    assert env.get_parallelism() == 3


@pytest.mark.parametrize("bad", [0, -3])
def test_env_parallelism_below_one_raises(bad):
    with pytest.raises(ValueError):
        StreamExecutionEnvironment().set_parallelism(bad)


@pytest.mark.parametrize("bad", [0, -1, 32769])
def test_env_max_parallelism_out_of_range_raises(bad):
    with pytest.raises(ValueError):
        StreamExecutionEnvironment().set_max_parallelism(bad)


def test_from_collection_is_pinned_to_parallelism_one():
    env = _env(4)
    src = env.from_collection([1, 2, 3])
    with pytest.raises(ValueError, match="non-parallel"):
        src.set_parallelism(2)
    src.set_parallelism(1)  # asking for 1 is fine
    src.map(str).print()
    jg, _ = env.get_job_graph()
    assert [(v.name, v.parallelism) for v in jg.vertices] == [
        ("Source: Collection Source", 1),
        ("Map -> Sink: Print to Std. Out", 4),
    ]
    assert [e.ship_strategy for e in jg.edges] == ["REBALANCE"]
    assert isinstance(env._transformations[src._id].function, CollectionSource)


def test_from_collection_reports_parallelism_one():
    env = _env(4)
    assert env.from_collection([1, 2, 3]).get_parallelism() == 1


def test_add_source_is_non_parallel_and_unbounded():
    class Gen(SourceFunction):
        def run(self, ctx):  # never called here
            raise AssertionError

    env = _env(3)
    env.add_source(Gen(), "My Source").print()
    jg, _ = env.get_job_graph()
    assert jg.vertices[0].name == "Source: My Source"
    assert jg.vertices[0].parallelism == 1
    assert jg.vertices[0].bounded is False


def test_source_arguments_are_type_checked():
    env = _env()
    with pytest.raises(TypeError):
        env.from_source(object())
    with pytest.raises(TypeError):
        env.add_source(lambda ctx: None)


def test_source_name_overrides_the_sources_own_name():
    env = _env()
    env.from_source(NumberSequenceSource(1, 3), source_name="numbers").print()
    jg, _ = env.get_job_graph()
    assert jg.vertices[0].name == "Source: numbers -> Sink: Print to Std. Out"


def test_a_job_needs_operators_and_a_sink():
    env = _env()
    with pytest.raises(RuntimeError, match="no operators"):
        env.get_job_graph()
    env.from_source(NumberSequenceSource(1, 3)).map(str)
    with pytest.raises(RuntimeError, match="no sinks"):
        env.get_job_graph()


def test_job_config_carries_the_settings():
    env = StreamExecutionEnvironment(Configuration().set_string("custom.key", "v"))
    env.set_parallelism(2).set_max_parallelism(64).set_buffer_timeout(50)
    env.set_job_parameter("input", "/tmp/x")
    env.from_source(NumberSequenceSource(1, 3)).print()
    jg, _ = env.get_job_graph()
    assert jg.config["parallelism.default"] == 2
    assert jg.config["pipeline.max-parallelism"] == 64
    assert jg.config["execution.buffer-timeout"] == 50
    assert jg.config["pipeline.operator-chaining"] is True
    assert jg.config["pipeline.global-job-parameters"] == {"input": "/tmp/x"}
    assert jg.config["custom.key"] == "v"
    assert jg.vertices[0].max_parallelism == 64


def test_building_twice_gives_the_same_topology():
    env = _env(2)
    env.from_source(NumberSequenceSource(1, 3)).map(str).key_by(len).sum(0).print()
    a, _ = env.get_job_graph()
    b, _ = env.get_job_graph()
    assert a.vertices == b.vertices and a.edges == b.edges


def test_stream_graph_is_returned_beside_the_job_graph_with_user_code():
    env = _env()
    fn = lambda v: v + 1  # noqa: E731
    m = env.from_source(NumberSequenceSource(1, 3)).map(fn)
    m.print()
    jg, sg = env.get_job_graph("named")
    assert sg.job_name == "named"
    assert sg.transformations[m._id].function is fn
    assert {o.node_id for v in jg.vertices for o in v.operators} == set(sg.nodes)
