"""Flame graph merging and the sampling bookkeeping of a vertex, pure: Flink's shape, the three types,
waiting while sampling, a refresh after the interval, and a slot that never answers."""
from __future__ import annotations

import pytest

from millstream.engine.jobmanager.vertex_flame_graph import (
    WAITING,
    FlameGraphOptions,
    FlameGraphType,
    VertexFlameGraphTracker,
    flame_graph,
)

SAMPLES = [
    [["main:1", "run:5", "burn_cpu:9"], 6, False],
    [["main:1", "run:5", "poll:3"], 3, True],
    [["main:1", "other:2"], 1, False],
]


def test_merges_stacks_into_flinks_tree_with_sample_counts() -> None:
    g = flame_graph(SAMPLES, FlameGraphType.FULL, 1234)
    assert g["endTimestamp"] == 1234
    root = g["data"]
    assert (root["name"], root["value"]) == ("root", 10)
    [main] = root["children"]
    assert (main["name"], main["value"]) == ("main:1", 10)
    run, other = main["children"]
    assert (run["value"], other["value"]) == (9, 1)
    assert {c["name"]: c["value"] for c in run["children"]} == {"burn_cpu:9": 6, "poll:3": 3}
    assert other["children"] == []


def test_on_and_off_cpu_keep_only_their_samples() -> None:
    on = flame_graph(SAMPLES, FlameGraphType.ON_CPU, 1)["data"]
    off = flame_graph(SAMPLES, FlameGraphType.OFF_CPU, 1)["data"]
    assert (on["value"], off["value"]) == (7, 3)
    assert off["children"][0]["children"][0]["children"][0]["name"] == "poll:3"


def test_type_parsing() -> None:
    assert FlameGraphType.parse(None) is FlameGraphType.FULL
    assert FlameGraphType.parse("ON_CPU") is FlameGraphType.ON_CPU
    with pytest.raises(ValueError, match="on_cpu"):
        FlameGraphType.parse("hot")


def test_waits_for_every_subtask_then_keeps_the_samples_until_the_refresh_interval() -> None:
    t = VertexFlameGraphTracker(FlameGraphOptions(num_samples=10, delay_ms=10, refresh_interval_s=60, answer_grace_s=1))
    assert t.needs_sampling("j", "v", 0.0)
    request = t.start("j", "v", [0, 1], 0.0)
    assert not t.needs_sampling("j", "v", 0.1)  # one sampling at a time
    assert t.answer("j", "v", FlameGraphType.FULL) == {"endTimestamp": WAITING, "data": None}
    request.answers[0] = [SAMPLES[0]]
    assert not t.finish_if_complete("j", "v", 0.5, 500)
    request.answers[1] = [SAMPLES[1]]
    assert t.finish_if_complete("j", "v", 0.6, 600)
    assert t.answer("j", "v", FlameGraphType.FULL)["data"]["value"] == 9
    assert not t.needs_sampling("j", "v", 59.0)
    assert t.needs_sampling("j", "v", 61.0)
    t.start("j", "v", [0], 61.0)
    assert t.answer("j", "v", FlameGraphType.FULL)["endTimestamp"] == 600  # the old graph while resampling
    t.forget_job("j")
    assert t.needs_sampling("j", "v", 62.0)


def test_a_slot_that_never_answers_is_left_out_after_the_deadline() -> None:
    t = VertexFlameGraphTracker(FlameGraphOptions(num_samples=10, delay_ms=10, answer_grace_s=1))
    request = t.start("j", "v", [0, 1], 0.0)
    request.answers[0] = [SAMPLES[2]]
    assert not t.finish_if_complete("j", "v", 1.0, 1000)
    assert t.finish_if_complete("j", "v", 1.2, 1200)  # 10 x 10 ms + 1 s grace
    assert t.answer("j", "v", FlameGraphType.FULL)["data"]["value"] == 1
