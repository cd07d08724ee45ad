"""JobGraph: operator chaining, vertex naming, Flink's plan JSON, serialisation."""
from __future__ import annotations

import json

import pytest

from millstream.engine.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from millstream.engine.datastream.connectors import DataGeneratorSource, NumberSequenceSource
from millstream.engine.datastream.connectors.source_function import SourceFunction
from millstream.engine.graph.job_graph import JobGraph, is_chainable


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment().set_parallelism(parallelism)


def _seq(env: StreamExecutionEnvironment):
    return env.from_source(NumberSequenceSource(1, 10))


def _names(jg: JobGraph) -> list[str]:
    return [v.name for v in jg.vertices]


def _edges(jg: JobGraph) -> list[tuple[str, str, str]]:
    name = {v.id: v.name for v in jg.vertices}
    return [(name[e.source_vertex], name[e.target_vertex], e.ship_strategy) for e in jg.edges]


def test_source_map_filter_sink_chain_into_one_vertex():
    env = _env()
    _seq(env).map(str).filter(bool).print()
    jg, _ = env.get_job_graph("chained")
    assert _names(jg) == ["Source: Sequence Source -> Map -> Filter -> Sink: Print to Std. Out"]
    assert jg.edges == ()
    (v,) = jg.vertices
    assert [o.kind for o in v.operators] == ["Source", "Map", "Filter", "Sink"]
    assert len(v.chained_edges) == 3
    assert v.is_source and v.head_node == v.operators[0].node_id
    assert v.id == v.operators[0].operator_id


def test_key_by_breaks_the_chain_with_a_hash_edge():
    env = _env()
    _seq(env).map(str).key_by(len).reduce(lambda a, b: a + b).print()
    jg, _ = env.get_job_graph()
    assert _names(jg) == ["Source: Sequence Source -> Map", "Reduce -> Sink: Print to Std. Out"]
    assert _edges(jg) == [("Source: Sequence Source -> Map", "Reduce -> Sink: Print to Std. Out", "HASH")]
    assert not jg.vertices[1].is_source


def test_different_parallelism_breaks_the_chain_with_rebalance():
    env = _env(2)
    _seq(env).map(str).set_parallelism(3).print()
    jg, _ = env.get_job_graph()
    assert [(v.name, v.parallelism) for v in jg.vertices] == [
        ("Source: Sequence Source", 2),
        ("Map", 3),
        ("Sink: Print to Std. Out", 2),
    ]
    assert [e.ship_strategy for e in jg.edges] == ["REBALANCE", "REBALANCE"]


@pytest.mark.parametrize("strategy", ["rebalance", "rescale", "broadcast", "shuffle"])
def test_non_forward_partitioning_breaks_the_chain_even_at_equal_parallelism(strategy):
    env = _env()
    getattr(_seq(env), strategy)().map(str).print()
    jg, _ = env.get_job_graph()
    assert _names(jg) == ["Source: Sequence Source", "Map -> Sink: Print to Std. Out"]
    assert [e.ship_strategy for e in jg.edges] == [strategy.upper()]


def test_explicit_forward_keeps_the_chain():
    env = _env()
    _seq(env).forward().map(str).print()
    jg, _ = env.get_job_graph()
    assert _names(jg) == ["Source: Sequence Source -> Map -> Sink: Print to Std. Out"]


def test_disable_chaining_isolates_the_operator_on_both_sides():
    env = _env()
    _seq(env).map(str).disable_chaining().filter(bool).print()
    jg, _ = env.get_job_graph()
    assert _names(jg) == ["Source: Sequence Source", "Map", "Filter -> Sink: Print to Std. Out"]
    assert [e.ship_strategy for e in jg.edges] == ["FORWARD", "FORWARD"]


def test_start_new_chain_breaks_before_but_not_after():
    env = _env()
    _seq(env).map(str).filter(bool).start_new_chain().map(len).print()
    jg, _ = env.get_job_graph()
    assert _names(jg) == [
        "Source: Sequence Source -> Map",
        "Filter -> Map -> Sink: Print to Std. Out",
    ]


def test_start_new_chain_on_a_source_still_chains_its_successors():
    env = _env()
    _seq(env).start_new_chain().map(str).print()
    jg, _ = env.get_job_graph()
    assert _names(jg) == ["Source: Sequence Source -> Map -> Sink: Print to Std. Out"]


def test_env_disable_operator_chaining_makes_one_vertex_per_operator():
    env = _env().disable_operator_chaining()
    _seq(env).map(str).filter(bool).print()
    jg, _ = env.get_job_graph()
    assert _names(jg) == ["Source: Sequence Source", "Map", "Filter", "Sink: Print to Std. Out"]
    assert [e.ship_strategy for e in jg.edges] == ["FORWARD"] * 3
    assert all(v.chained_edges == () for v in jg.vertices)
    assert jg.config["pipeline.operator-chaining"] is False


def test_union_gives_a_vertex_with_two_inputs():
    env = _env()
    a = _seq(env)
    b = env.from_source(NumberSequenceSource(100, 110)).map(str)
    a.union(b).map(str).print()
    jg, _ = env.get_job_graph()
    assert _names(jg) == [
        "Source: Sequence Source",
        "Source: Sequence Source -> Map",
        "Map -> Sink: Print to Std. Out",
    ]
    target = jg.vertices[2]
    ins = jg.in_edges(target.id)
    assert {e.source_vertex for e in ins} == {jg.vertices[0].id, jg.vertices[1].id}
    # A union is one logical input, so both edges feed input 0.
    assert [e.input_index for e in ins] == [0, 0]
    # The edge out of the chained source names the operator that emits, not the chain head.
    emitting = {e.source_node for e in ins}
    assert jg.vertices[1].operators[-1].node_id in emitting


def test_is_chainable_refuses_an_edge_into_an_operator_with_two_inputs():
    env = _env()
    _seq(env).union(_seq(env)).map(str).print()
    sg = env.get_stream_graph()
    map_id = next(i for i, n in sg.nodes.items() if n.kind.value == "Map")
    edges = sg.in_edges(map_id)
    assert len(edges) == 2 and all(e.ship_strategy.value == "FORWARD" for e in edges)
    assert not any(is_chainable(sg, e) for e in edges)
    sink_edge = sg.out_edges(map_id)[0]
    assert is_chainable(sg, sink_edge)
    assert not is_chainable(sg, sink_edge, chaining_enabled=False)


def test_fan_out_chains_both_forward_consumers():
    env = _env()
    s = _seq(env)
    s.map(str).print()
    s.filter(bool).print()
    jg, _ = env.get_job_graph()
    assert len(jg.vertices) == 1
    assert [o.kind for o in jg.vertices[0].operators] == ["Source", "Map", "Sink", "Filter", "Sink"]


def test_vertex_ids_are_unique_and_edges_reference_existing_vertices():
    env = _env(2)
    a, b = _seq(env), _seq(env)
    a.union(b).key_by(lambda v: v % 2).reduce(lambda x, y: x + y).map(str).set_parallelism(3).print()
    jg, _ = env.get_job_graph()
    ids = [v.id for v in jg.vertices]
    assert len(set(ids)) == len(ids)
    for e in jg.edges:
        assert e.source_vertex in ids and e.target_vertex in ids
        assert jg.vertex(e.target_vertex).head_node == e.target_node
    assert [e.index for e in jg.edges] == list(range(len(jg.edges)))
    with pytest.raises(KeyError):
        jg.vertex("nope")


def test_max_parallelism_property_is_the_highest_vertex_parallelism():
    env = _env(2)
    _seq(env).map(str).set_parallelism(5).print()
    jg, _ = env.get_job_graph()
    assert jg.max_parallelism == 5


# -- plan JSON -----------------------------------------------------------------


def test_plan_json_has_flinks_shape():
    env = _env(2)
    _seq(env).map(str).key_by(len).reduce(lambda a, b: a).print()
    # The REST /jobs/{id}/plan shape; env.get_execution_plan() is the StreamGraph JSON (tests/engine/graph/test_json_generator.py).
    plan = env.get_job_graph()[0].to_plan()
    assert set(plan) >= {"jid", "name", "type", "nodes"}
    assert plan["type"] == "STREAMING"
    source, keyed = plan["nodes"]
    for node in plan["nodes"]:
        assert {"id", "parallelism", "operator", "description"} <= set(node)
        assert node["parallelism"] == 2
    assert source["operator"] == "Source: Sequence Source -> Map"
    assert source["description"] == source["operator"]
    assert "inputs" not in source
    assert keyed["inputs"] == [
        {"num": 0, "id": source["id"], "ship_strategy": "HASH", "exchange": "pipelined_bounded"}
    ]


def test_plan_numbers_multiple_inputs():
    env = _env()
    _seq(env).union(_seq(env)).map(str).print()
    jg, _ = env.get_job_graph()
    plan = jg.to_plan()
    sink_node = plan["nodes"][-1]
    assert [i["num"] for i in sink_node["inputs"]] == [0, 1]
    assert {i["id"] for i in sink_node["inputs"]} == {plan["nodes"][0]["id"], plan["nodes"][1]["id"]}
    assert plan["jid"] == jg.job_id and plan["name"] == jg.name


def test_job_name_and_fresh_job_ids():
    env = _env()
    _seq(env).print()
    jg1, _ = env.get_job_graph("my job")
    jg2, _ = env.get_job_graph("my job")
    assert jg1.name == "my job"
    assert jg1.job_id != jg2.job_id
    assert len(jg1.job_id) == 32
    assert [v.id for v in jg1.vertices] == [v.id for v in jg2.vertices]


# -- serialisation -------------------------------------------------------------


def test_to_dict_from_dict_round_trips_through_json():
    env = _env(2)
    env.set_job_parameter("k", "v")
    a, b = _seq(env), _seq(env)
    a.union(b).map(str).uid("m").key_by(len).reduce(lambda x, y: x).set_parallelism(3).print()
    jg, _ = env.get_job_graph("round trip")
    restored = JobGraph.from_dict(json.loads(json.dumps(jg.to_dict())))
    assert restored == jg
    assert restored.to_plan() == jg.to_plan()
    assert restored.config["pipeline.global-job-parameters"] == {"k": "v"}


# -- job type --------------------------------------------------------------------


class _Endless(SourceFunction):
    def run(self, ctx):  # never called: no job is executed here
        raise AssertionError


@pytest.mark.parametrize(
    ("mode", "bounded_only", "expected"),
    [
        (RuntimeExecutionMode.STREAMING, True, "STREAMING"),
        (RuntimeExecutionMode.BATCH, True, "BATCH"),
        (RuntimeExecutionMode.BATCH, False, "BATCH"),
        (RuntimeExecutionMode.AUTOMATIC, True, "BATCH"),
        (RuntimeExecutionMode.AUTOMATIC, False, "STREAMING"),
    ],
)
def test_job_type(mode, bounded_only, expected):
    env = _env().set_runtime_mode(mode)
    s = _seq(env)
    if not bounded_only:
        s = s.union(env.add_source(_Endless()))
    s.print()
    jg, _ = env.get_job_graph()
    assert jg.job_type == expected
    assert jg.to_plan()["type"] == expected
    assert jg.config["execution.runtime-mode"] == mode.value


def test_unbounded_datagen_keeps_automatic_mode_streaming():
    env = _env().set_runtime_mode(RuntimeExecutionMode.AUTOMATIC)
    env.from_source(DataGeneratorSource(lambda i: i, None)).print()
    jg, _ = env.get_job_graph()
    assert jg.job_type == "STREAMING"
    assert jg.vertices[0].bounded is False
