"""StreamGraph: parallelism resolution, edges and their ship strategies, operator ids."""
from __future__ import annotations

import re

import pytest

from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.connectors import NumberSequenceSource
from millstream.engine.graph.stream_graph import GraphBuildError, build_stream_graph
from millstream.engine.graph.transformations import OperatorKind, ShipStrategy, Transformation


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment().set_parallelism(parallelism)


def _seq(env: StreamExecutionEnvironment):
    return env.from_source(NumberSequenceSource(1, 10))


def _edges_by_name(graph) -> list[tuple[str, str, ShipStrategy]]:
    return [(graph.nodes[e.source].name, graph.nodes[e.target].name, e.ship_strategy) for e in graph.edges]


def test_virtual_transformations_become_edges_not_nodes():
    env = _env()
    a, b = _seq(env), _seq(env)
    a.union(b).rebalance().map(str).print()
    graph = env.get_stream_graph()
    kinds = sorted(n.kind.value for n in graph.nodes.values())
    assert kinds == ["Map", "Sink", "Source", "Source"]
    assert all(not n.kind.is_virtual for n in graph.nodes.values())
    assert _edges_by_name(graph) == [
        ("Sequence Source", "Map", ShipStrategy.REBALANCE),
        ("Sequence Source", "Map", ShipStrategy.REBALANCE),
        ("Map", "Print to Std. Out", ShipStrategy.FORWARD),
    ]


def test_default_edge_is_forward_at_equal_parallelism_and_rebalance_otherwise():
    env = _env(2)
    _seq(env).map(str).map(str).set_parallelism(3).print()
    strategies = [e.ship_strategy for e in env.get_stream_graph().edges]
    # source(2) -> map(2) -> map(3) -> sink(2)
    assert strategies == [ShipStrategy.FORWARD, ShipStrategy.REBALANCE, ShipStrategy.REBALANCE]


def test_key_by_gives_a_hash_edge_and_registers_the_key_selector():
    env = _env()
    selector = lambda v: v % 3  # noqa: E731
    _seq(env).key_by(selector).reduce(lambda a, b: a + b).print()
    graph = env.get_stream_graph()
    hash_edges = [e for e in graph.edges if e.ship_strategy is ShipStrategy.HASH]
    assert len(hash_edges) == 1
    assert graph.nodes[hash_edges[0].target].kind is OperatorKind.REDUCE
    assert graph.key_selectors == {hash_edges[0].target: selector}


def test_partitioning_closest_to_the_consumer_wins():
    env = _env()
    _seq(env).rebalance().broadcast().map(str).print()
    graph = env.get_stream_graph()
    assert graph.edges[0].ship_strategy is ShipStrategy.BROADCAST


def test_partitioning_after_a_union_applies_to_every_input():
    env = _env()
    a, b = _seq(env), _seq(env)
    a.union(b).key_by(lambda v: v).reduce(lambda x, y: x).print()
    graph = env.get_stream_graph()
    reduce_id = next(n.id for n in graph.nodes.values() if n.kind is OperatorKind.REDUCE)
    assert [e.ship_strategy for e in graph.in_edges(reduce_id)] == [ShipStrategy.HASH, ShipStrategy.HASH]


def test_explicit_forward_across_a_change_of_parallelism_raises():
    env = _env(1)
    _seq(env).forward().map(str).set_parallelism(2).print()
    with pytest.raises(GraphBuildError, match="forward partitioning"):
        env.get_stream_graph()


def test_explicit_forward_at_equal_parallelism_is_allowed():
    env = _env(2)
    _seq(env).forward().map(str).print()
    assert env.get_stream_graph().edges[0].ship_strategy is ShipStrategy.FORWARD


def test_parallelism_above_max_parallelism_raises():
    env = _env(1)
    _seq(env).map(str).set_max_parallelism(4).set_parallelism(5).print()
    with pytest.raises(GraphBuildError, match="exceeds its max parallelism 4"):
        env.get_stream_graph()


def test_env_parallelism_above_env_max_parallelism_raises():
    env = _env(8).set_max_parallelism(4)
    _seq(env).print()
    with pytest.raises(GraphBuildError):
        env.get_stream_graph()


def test_parallelism_equal_to_max_parallelism_is_allowed():
    env = _env(1)
    _seq(env).map(str).set_max_parallelism(4).set_parallelism(4).print()
    nodes = env.get_stream_graph().nodes.values()
    assert [(n.parallelism, n.max_parallelism) for n in nodes if n.kind is OperatorKind.MAP] == [(4, 4)]


@pytest.mark.parametrize("max_par", [-1, 32769])
def test_operator_max_parallelism_out_of_range_raises(max_par):
    env = _env()
    with pytest.raises(ValueError, match="max parallelism"):
        _seq(env).map(str).set_max_parallelism(max_par)


def test_operator_max_parallelism_zero_is_rejected():
    env = _env()
    with pytest.raises(ValueError):
        _seq(env).map(str).set_max_parallelism(0).print()
        env.get_stream_graph()


def test_negative_parallelism_in_a_transformation_raises():
    t = Transformation(id=1, kind=OperatorKind.SOURCE, name="src", parallelism=-2)
    with pytest.raises(GraphBuildError, match="at least 1"):
        build_stream_graph([t], "job", default_parallelism=1)


def test_fixed_parallelism_wins_over_requested_and_default_parallelism():
    src = Transformation(id=1, kind=OperatorKind.SOURCE, name="src", parallelism=4, fixed_parallelism=1)
    sink = Transformation(id=2, kind=OperatorKind.SINK, name="sink", inputs=(1,))
    graph = build_stream_graph([src, sink], "job", default_parallelism=3)
    assert graph.nodes[1].parallelism == 1
    assert graph.nodes[2].parallelism == 3
    assert graph.edges[0].ship_strategy is ShipStrategy.REBALANCE


def test_default_max_parallelism_is_128_and_env_setting_applies():
    env = _env()
    _seq(env).print()
    assert {n.max_parallelism for n in env.get_stream_graph().nodes.values()} == {128}
    env2 = _env().set_max_parallelism(1024)
    _seq(env2).print()
    assert {n.max_parallelism for n in env2.get_stream_graph().nodes.values()} == {1024}


# -- operator ids ------------------------------------------------------------


def _pipeline(parallelism: int = 1, map_uid: str | None = None, extra_filter: bool = False, chaining: bool = True):
    env = _env(parallelism)
    if not chaining:
        env.disable_operator_chaining()
    s = _seq(env)
    if extra_filter:
        s = s.filter(bool)
    m = s.map(str).name("renamed")
    if map_uid:
        m = m.uid(map_uid)
    m.key_by(len).reduce(lambda a, b: a).print()
    return env.get_stream_graph()


def _ids(graph) -> list[str]:
    return [graph.nodes[i].operator_id for i in sorted(graph.nodes)]


def test_operator_ids_are_32_hex_chars_and_unique():
    ids = _ids(_pipeline())
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_operator_ids_are_stable_across_identical_builds():
    assert _ids(_pipeline()) == _ids(_pipeline())


def test_operator_ids_survive_a_change_of_parallelism_and_of_chaining():
    # Restoring with another parallelism must still match state to operators.
    assert _ids(_pipeline(parallelism=1)) == _ids(_pipeline(parallelism=4))
    assert _ids(_pipeline(chaining=True)) == _ids(_pipeline(chaining=False))


def test_generated_ids_change_with_the_topology_but_uid_pins_the_id():
    plain, plain_extra = _pipeline(), _pipeline(extra_filter=True)
    map_id = lambda g: next(n.operator_id for n in g.nodes.values() if n.kind is OperatorKind.MAP)  # noqa: E731
    assert map_id(plain) != map_id(plain_extra)

    with_uid = _pipeline(map_uid="my-map")
    with_uid_extra = _pipeline(map_uid="my-map", extra_filter=True)
    assert map_id(with_uid) == map_id(with_uid_extra)
    assert map_id(with_uid) != map_id(plain)
    assert map_id(_pipeline(map_uid="other")) != map_id(with_uid)


def test_duplicate_uids_are_rejected():
    env = _env()
    a = _seq(env).uid("dup")
    b = _seq(env).uid("dup")
    a.union(b).print()
    with pytest.raises(GraphBuildError):
        env.get_stream_graph()
