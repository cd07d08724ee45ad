"""``env.get_execution_plan()``: Flink's StreamGraph JSON, in Jackson's layout, as PyFlink prints it."""
from __future__ import annotations

import json

import pytest

from millstream.engine.common.row import Row
from millstream.engine.common.typeinfo import Types
from millstream.engine.datastream.functions import CoMapFunction
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from millstream.engine.graph.json_generator import jackson_pretty


def _env(parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    return env


def test_plan_nodes_have_flinks_fields_sinks_last():
    env = _env(2)
    ds = env.from_collection([("a", 1), ("b", 2)], type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
    ds.key_by(lambda x: x[0]).reduce(lambda a, b: a).print()
    ds.rebalance().filter(lambda x: True).set_parallelism(3).print()
    plan = json.loads(env.get_execution_plan())
    assert list(plan) == ["nodes"]
    nodes = plan["nodes"]
    assert [n["pact"] for n in nodes] == ["Data Source", "Operator", "Operator", "Operator", "Data Sink", "Data Sink"]
    # Ordered by id: key_by's map takes its id when key_by is called, before the reduce, as in PyFlink.
    source, key_by_map, reduce, filt, sink1, sink2 = nodes
    assert source == {
        "id": source["id"], "type": "Source: Collection Source", "pact": "Data Source",
        "contents": "Source: Collection Source", "parallelism": 1,
    }
    # PyFlink's key_by is a Python map at its input's parallelism, then the HASH edge (recorded from
    # PyFlink 2.3.0: Source -FORWARD-> _stream_key_by_map_operator (1) -HASH-> Reduce).
    assert key_by_map["contents"] == "_stream_key_by_map_operator" and key_by_map["parallelism"] == 1
    assert key_by_map["predecessors"] == [{"id": source["id"], "ship_strategy": "FORWARD", "side": "second"}]
    assert reduce["predecessors"] == [{"id": key_by_map["id"], "ship_strategy": "HASH", "side": "second"}]
    # A change of parallelism without explicit partitioning is REBALANCE, as in Flink.
    assert filt["parallelism"] == 3
    assert filt["predecessors"] == [{"id": source["id"], "ship_strategy": "REBALANCE", "side": "second"}]
    assert sink1["type"] == "Sink: Print to Std. Out" and sink1["predecessors"][0]["id"] == reduce["id"]
    assert sink2["predecessors"] == [{"id": filt["id"], "ship_strategy": "REBALANCE", "side": "second"}]
    assert sink1["id"] < filt["id"]  # ordered by id except that sinks come last


def test_plan_text_is_jacksons_layout():
    env = _env(1)
    env.from_collection([1]).map(str).print()
    text = env.get_execution_plan()
    # The text PyFlink 2.3 prints for such a job (its ids and node names differ; the layout is this).
    assert text.startswith('{\n  "nodes" : [ {\n    "id" : 1,\n    "type" : "Source: Collection Source",\n')
    assert '    "predecessors" : [ {\n      "id" : 1,\n      "ship_strategy" : "FORWARD",\n      "side" : "second"\n    } ]\n' in text
    assert text.endswith("  } ]\n}")
    assert jackson_pretty({"a": [], "b": {}, "c": "x\"y"}) == '{\n  "a" : [ ],\n  "b" : { },\n  "c" : "x\\"y"\n}'


def test_two_inputs_list_both_predecessors_and_the_job_still_runs_after():
    env = _env(1)
    a = env.from_collection([1, 2])
    b = env.from_collection([3])
    a.connect(b).map(_CoId()).print()
    plan = json.loads(env.get_execution_plan())
    co = next(n for n in plan["nodes"] if n["type"] == "Co-Map")
    assert [p["id"] for p in co["predecessors"]] == [1, 2]
    # get_execution_plan leaves the program in place: the job can still be built and run.
    assert env.get_job_graph()[0].vertices


def test_plan_of_an_empty_program_is_refused():
    with pytest.raises(RuntimeError, match="no operators"):
        _env().get_execution_plan()


class _CoId(CoMapFunction):
    def map1(self, v):
        return v

    def map2(self, v):
        return v


def test_consecutive_python_functions_are_fused_as_pyflink_shows_them():
    env = _env(2)
    src = env.from_collection([1], type_info=Types.INT())
    # typed records: print() needs no conversion map (test_print_of_untyped_records_and_rows_...)
    src.map(lambda x: x, output_type=Types.INT()).filter(lambda x: True).flat_map(lambda x: [x], output_type=Types.INT()).print()
    nodes = json.loads(env.get_execution_plan())["nodes"]
    fused = [n for n in nodes if n["type"] == "Map, Filter, FlatMap"]
    assert len(fused) == 1
    # PyFlink's optimizer fuses pair by pair, each pair taking a new transformation id: the run of
    # three shows under the second (as in the plan_ids_key_by_consumers fixture).
    assert fused[0]["id"] == env._next_id + 1 and fused[0]["predecessors"] == [{"id": 1, "ship_strategy": "REBALANCE", "side": "second"}]
    sink = next(n for n in nodes if n["pact"] == "Data Sink")
    assert sink["predecessors"][0]["id"] == fused[0]["id"]


def test_no_fusion_across_disabled_chaining_parallelism_changes_or_fan_out():
    env = _env(2)
    src = env.from_collection([1], type_info=Types.INT())
    m = src.map(lambda x: x, output_type=Types.INT())
    m.filter(lambda x: True).disable_chaining().print()
    m.map(lambda x: x, output_type=Types.INT()).set_parallelism(3).print()
    types = [n["type"] for n in json.loads(env.get_execution_plan())["nodes"]]
    assert "Map, Filter" not in types and types.count("Map") == 2  # m fans out: nothing fuses onto it
    env2 = _env(2)
    env2.disable_operator_chaining()
    env2.from_collection([1], type_info=Types.INT()).map(lambda x: x, output_type=Types.INT()).filter(lambda x: True).print()
    assert "Map, Filter" not in [n["type"] for n in json.loads(env2.get_execution_plan())["nodes"]]


def test_key_by_map_fuses_with_the_python_function_before_it_and_is_shared_by_one_keyed_streams_consumers():
    # Recorded from PyFlink 2.3.0: map(...).set_parallelism(3).key_by(...) plans as
    # "Map, _stream_key_by_map_operator" at parallelism 3; two consumers of one KeyedStream share one.
    env = _env(2)
    keyed = env.from_collection([1, 2, 3], type_info=Types.INT()).map(lambda x: x).set_parallelism(3).key_by(lambda x: x % 2)
    keyed.map(lambda x: x).print()
    keyed.filter(lambda x: True).print()
    nodes = json.loads(env.get_execution_plan())["nodes"]
    fused = [n for n in nodes if "_stream_key_by_map_operator" in n["contents"]]
    assert [(n["contents"], n["parallelism"]) for n in fused] == [("Map, _stream_key_by_map_operator", 3)]
    hashed = [n for n in nodes if n.get("predecessors", [{}])[0].get("ship_strategy") == "HASH"]
    assert len(hashed) == 2 and all(n["predecessors"][0]["id"] == fused[0]["id"] for n in hashed)


def test_print_of_untyped_records_and_rows_reads_from_a_conversion_map_as_in_pyflink():
    """PyFlink's print() first turns pickled records and Rows into strings with a Python map,
    which fuses with the Python functions before it (recorded: plan_print_conversion)."""
    env = _env(2)
    src = env.from_collection([1], type_info=Types.INT())
    src.map(lambda x: x).print()
    src.map(lambda x: Row(x), output_type=Types.ROW([Types.INT()])).print()
    src.map(lambda x: x, output_type=Types.INT()).print()
    nodes = json.loads(env.get_execution_plan())["nodes"]
    by_id = {n["id"]: n for n in nodes}
    sink_inputs = sorted(by_id[n["predecessors"][0]["id"]]["type"] for n in nodes if n["pact"] == "Data Sink")
    assert sink_inputs == ["Map", "Map, Map", "Map, Map"]
    assert all(n["predecessors"][0]["ship_strategy"] == "FORWARD" for n in nodes if n["pact"] == "Data Sink")


def test_projection_is_never_fused_with_python_functions():
    env = _env(2)
    t = Types.TUPLE([Types.INT(), Types.INT()])
    env.from_collection([(1, 2)], type_info=t).map(lambda x: x, output_type=t).project(1) \
        .map(lambda x: x, output_type=Types.TUPLE([Types.INT()])).print()
    types = [n["type"] for n in json.loads(env.get_execution_plan())["nodes"]]
    assert types == ["Source: Collection Source", "Map", "Projection", "Map", "Sink: Print to Std. Out"]
