"""The JobGraph rewrite behind "Resume from this savepoint": new job id, new parallelism on the
vertices that ran at the default, non-parallel sources and FORWARD groups kept, max parallelism
respected. JobGraphs come from real programs built with the DataStream API."""
from __future__ import annotations

from typing import Any

import pytest

from millstream.backend.services.resume import ResumeRefused, rescale_job_graph
from millstream.engine.common import WatermarkStrategy
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.connectors import DataGeneratorSource
from millstream.engine.graph.job_graph import JobGraph

NEW_ID = "ab" * 16


def _graph(parallelism: int, *, collection: bool = False, max_parallelism: int | None = None,
           chaining: bool = True, savepoint: str | None = None) -> dict[str, Any]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    if max_parallelism:
        env.set_max_parallelism(max_parallelism)
    if not chaining:
        env.disable_operator_chaining()
    gen = DataGeneratorSource(lambda i: ("k%d" % (i % 5), i), None, records_per_second=10)
    env.from_source(gen, WatermarkStrategy.no_watermarks(), "gen").key_by(lambda t: t[0]).sum(1).print()
    if collection:  # a non-parallel source: always parallelism 1
        env.from_collection([1, 2, 3]).map(lambda x: x).print()
    d = env.get_job_graph("job")[0].to_dict()
    if savepoint:
        d["config"]["execution.savepoint.path"] = savepoint
    return d


def _par(d: dict[str, Any]) -> dict[str, int]:
    return {v["name"]: v["parallelism"] for v in d["vertices"]}


def test_vertices_at_the_default_take_the_new_parallelism_under_a_new_id() -> None:
    old = _graph(2, collection=True, savepoint="/old/savepoint-1")
    out = rescale_job_graph(old, 3, NEW_ID)
    g = out.job_graph
    assert g["job_id"] == NEW_ID != old["job_id"]
    assert _par(g) == {
        "Source: gen": 3,
        "Keyed Aggregation -> Sink: Print to Std. Out": 3,
        "Source: Collection Source": 1,  # non-parallel: stays at 1
        "Map -> Sink: Print to Std. Out": 3,
    }
    assert out.kept == ("Source: Collection Source",)
    assert [v["max_parallelism"] for v in g["vertices"]] == [v["max_parallelism"] for v in old["vertices"]]
    assert g["config"]["parallelism.default"] == 3
    assert "execution.savepoint.path" not in g["config"]  # the caller names the savepoint to start from
    # operator ids (how state is matched) are untouched, and the input was not modified
    assert [o["operator_id"] for v in g["vertices"] for o in v["operators"]] == \
        [o["operator_id"] for v in old["vertices"] for o in v["operators"]]
    assert _par(old)["Source: gen"] == 2 and old["config"]["execution.savepoint.path"] == "/old/savepoint-1"
    JobGraph.from_dict(g)  # still a JobGraph the Dispatcher accepts


def test_scaling_down_and_keeping_the_parallelism() -> None:
    assert set(_par(rescale_job_graph(_graph(3), 1, NEW_ID).job_graph).values()) == {1}
    same = rescale_job_graph(_graph(2), None, NEW_ID)
    assert _par(same.job_graph) == _par(_graph(2)) and same.parallelism is None and same.kept == ()


def _without_flag(g: dict[str, Any]) -> dict[str, Any]:
    """A JobGraph as stored before vertices said whether they are non-parallel."""
    for v in g["vertices"]:
        del v["fixed_parallelism"]
    return g


def test_a_parallel_source_of_a_job_at_one_scales_with_its_forward_group() -> None:
    # Without chaining, gen -> key_by is HASH but sum -> print is FORWARD between two vertices.
    g = _graph(1, chaining=False)
    assert [v["fixed_parallelism"] for v in g["vertices"]] == [False, False, False]
    forward = [e for e in g["edges"] if e["ship_strategy"] == "FORWARD"]
    assert forward, "the test needs an unchained FORWARD edge"
    out = rescale_job_graph(g, 4, NEW_ID).job_graph
    assert _par(out) == {"Source: gen": 4, "Keyed Aggregation": 4, "Sink: Print to Std. Out": 4}
    # An older JobGraph does not say whether the source is non-parallel, so it stays at 1.
    old = rescale_job_graph(_without_flag(_graph(1, chaining=False)), 4, NEW_ID).job_graph
    assert _par(old)["Source: gen"] == 1
    assert _par(old)["Keyed Aggregation"] == 4 and _par(old)["Sink: Print to Std. Out"] == 4
    by_id = {v["id"]: v["parallelism"] for v in old["vertices"]}
    for e in old["edges"]:
        if e["ship_strategy"] == "FORWARD":
            assert by_id[e["source_vertex"]] == by_id[e["target_vertex"]]
    JobGraph.from_dict(old)  # a stored JobGraph without the flag still loads


def test_forward_group_with_a_kept_vertex_is_kept_whole() -> None:
    g = _without_flag(_graph(1, chaining=False))
    # every edge FORWARD: one group, holding the source that must stay at 1
    for e in g["edges"]:
        e["ship_strategy"] = "FORWARD"
    out = rescale_job_graph(g, 4, NEW_ID)
    assert set(_par(out.job_graph).values()) == {1}
    assert len(out.kept) == 3


def test_a_parallelism_above_max_parallelism_is_refused_clearly() -> None:
    with pytest.raises(ResumeRefused, match=r"Parallelism 9 is above the max parallelism 8 of 'Source: gen'.*at most 8"):
        rescale_job_graph(_graph(2, max_parallelism=8), 9, NEW_ID)
    with pytest.raises(ResumeRefused, match="at least 1"):
        rescale_job_graph(_graph(2), 0, NEW_ID)
    assert _par(rescale_job_graph(_graph(2, max_parallelism=8), 8, NEW_ID).job_graph)["Source: gen"] == 8
