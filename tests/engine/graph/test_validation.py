"""JobGraph validation: real graphs pass; cycles, self-loops, duplicate ids, unknown ship strategies,
dangling edges, bad types and bad checkpoint configs are refused with a message naming the problem."""
from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.functions import CoMapFunction
from millstream.engine.datastream.connectors import NumberSequenceSource
from millstream.engine.graph.validation import InvalidJobGraph, parse_job_graph, validate_job_graph


class _Both(CoMapFunction):
    def map1(self, value):
        return value

    def map2(self, value):
        return value


def _graph_dict(two_inputs: bool = False) -> dict[str, Any]:
    env = StreamExecutionEnvironment().set_parallelism(2)
    s = env.from_source(NumberSequenceSource(1, 10)).map(str).key_by(len)
    if two_inputs:
        s = s.connect(env.from_source(NumberSequenceSource(1, 5)).map(str).key_by(len)).map(_Both())
    s.map(str).set_parallelism(3).print()
    jg, _ = env.get_job_graph("valid")
    return json.loads(json.dumps(jg.to_dict()))


def _refused(d: Any, *fragments: str, max_parallelism: int = 32768) -> str:
    with pytest.raises(InvalidJobGraph) as exc:
        parse_job_graph(d, max_parallelism)
    for f in fragments:
        assert f in str(exc.value), str(exc.value)
    return str(exc.value)


@pytest.mark.parametrize("two_inputs", [False, True])
def test_graphs_built_by_the_api_pass(two_inputs: bool):
    d = _graph_dict(two_inputs)
    assert len(d["edges"]) >= 2
    graph = parse_job_graph(d)
    validate_job_graph(graph, max_parallelism=3)


def test_a_cycle_is_refused():
    d = _graph_dict()
    first, last = d["vertices"][0], d["vertices"][-1]
    back = {**d["edges"][0], "index": 99, "source_vertex": last["id"], "target_vertex": d["vertices"][1]["id"],
            "source_node": last["operators"][-1]["node_id"], "target_node": d["vertices"][1]["operators"][0]["node_id"]}
    d["edges"].append(back)
    assert first["id"] not in _refused(d, "cycle").split("cycle:")[1]  # the source is not on it


def test_a_self_loop_is_refused():
    d = _graph_dict()
    v = d["vertices"][1]
    d["edges"].append({**d["edges"][0], "index": 9, "source_vertex": v["id"], "target_vertex": v["id"],
                       "source_node": v["operators"][0]["node_id"], "target_node": v["operators"][0]["node_id"]})
    _refused(d, "self-loop")


def test_duplicate_vertex_ids_are_refused():
    d = _graph_dict()
    d["vertices"][2]["id"] = d["vertices"][1]["id"]
    _refused(d, "duplicate vertex id")


def test_an_unknown_ship_strategy_is_refused():
    d = _graph_dict()
    d["edges"][0]["ship_strategy"] = "TELEPORT"
    _refused(d, "unknown ship strategy 'TELEPORT'")


def test_an_edge_to_a_missing_vertex_is_refused():
    d = _graph_dict()
    d["edges"][0]["target_vertex"] = "f" * 32
    _refused(d, "does not exist")


def test_wrong_types_are_reported_by_field_not_crashing():
    d = _graph_dict()
    d["vertices"][0]["parallelism"] = "4"
    d["edges"][0]["source_node"] = None
    msg = _refused(d, "vertices[0].parallelism must be int", "edges[0].source_node must be int")
    assert "'4'" in msg
    for bad in ([1], "x", None, {"job_id": 5, "vertices": "x"}, {**_graph_dict(), "vertices": [[]]}):
        _refused(bad)
    d = _graph_dict()
    d["vertices"][0]["is_source"] = 1  # an int is not a bool
    _refused(d, "is_source must be bool")
    d = _graph_dict()
    d["vertices"][0]["extra"] = 1
    _refused(d, "malformed JobGraph")


def test_parallelism_bounds_and_the_cluster_limit():
    d = _graph_dict()
    d["vertices"][0]["parallelism"] = 0
    _refused(d, "must be at least 1")
    d = _graph_dict()
    _refused(d, "exceeds the cluster limit 2", max_parallelism=2)
    d["vertices"][0]["parallelism"] = d["vertices"][0]["max_parallelism"] + 1
    _refused(d, "exceeds its max parallelism")


def test_a_too_short_checkpoint_interval_is_refused():
    d = _graph_dict()
    d["config"]["execution.checkpointing.interval"] = 1
    _refused(d, "checkpoint interval must be -1 (disabled) or at least 10 ms, got 1")
    d["config"] = {"execution.checkpointing": {"interval_ms": "often"}}
    _refused(d, "checkpoint interval must be an integer")


def test_job_id_type_and_empty_graph():
    d = _graph_dict()
    d["job_id"] = "x"
    d["job_type"] = "QUANTUM"
    _refused(d, "32 lowercase hex", "job type must be one of")
    d = _graph_dict()
    d["vertices"], d["edges"] = [], []
    _refused(d, "no operators")


def test_edges_must_attach_to_the_right_operators():
    d = _graph_dict()
    d["edges"][0]["target_node"] = d["vertices"][0]["operators"][0]["node_id"]
    _refused(d, "not the head of its target vertex")
    d = _graph_dict()
    d["edges"][0]["target_vertex"] = d["vertices"][0]["id"]  # into the source
    _refused(d, "leads into source vertex")


def test_many_problems_are_summarised():
    d = _graph_dict()
    for e in d["edges"]:
        e["ship_strategy"] = "X"
    bad = copy.deepcopy(d["edges"][0])
    d["edges"] += [{**bad, "index": 100 + i} for i in range(20)]
    msg = _refused(d, "more)")
    assert msg.count("unknown ship strategy") == 10


@pytest.mark.parametrize("bad, why", [("/tmp/a\x00b", "NUL"), ("/tmp/\ud800", "lone surrogate")])
def test_config_text_that_cannot_become_a_path_is_refused(bad: str, why: str):
    d = _graph_dict()
    d["config"]["execution.savepoint.path"] = bad
    _refused(d, "config option 'execution.savepoint.path' contains a " + why)
    d = _graph_dict()
    d["config"]["execution.checkpointing"] = {"storage_dir": bad}
    _refused(d, "'storage_dir' contains a " + why)


def test_a_bad_restart_strategy_is_refused():
    d = _graph_dict()
    d["config"]["restart-strategy"] = "fixed"
    _refused(d, "'restart-strategy' must be an object")
    d["config"]["restart-strategy"] = {"type": "fixed-delay", "attempts": "3", "delay_ms": -1, "jitter": 1}
    _refused(d, "attempts must be a non-negative integer", "delay_ms must be", "unknown keys jitter")
    d["config"]["restart-strategy"] = {"type": "sometimes"}
    _refused(d, "type must be one of")
    d["config"]["restart-strategy"] = {"type": "fixed-delay", "attempts": 3, "delay_ms": 10}
    parse_job_graph(d)


@pytest.mark.parametrize("key", ["state.backend.incremental", "state.backend.hashmap.full-checkpoints-from-changes"])
def test_a_state_backend_flag_that_is_neither_true_nor_false_is_refused(key):
    d = _graph_dict()
    d["config"][key] = "yes"
    _refused(d, f"config option {key!r}", "Expected either true or false")
    d["config"][key] = " TRUE "
    parse_job_graph(d)  # any case, around spaces: as Flink reads a boolean
