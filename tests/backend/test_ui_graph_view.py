"""The Graph tab's view model: node colours, figures, and one box per vertex / subtask."""
from __future__ import annotations

from typing import Any

from millstream.backend.ui.graph_view import graph_model
from millstream.backend.ui.vertex_metrics import vertex_colour, vertex_figures


def _hue(colour: str) -> int:
    return int(colour.split("(")[1].split(",")[0])


def _light(colour: str) -> int:
    return int(colour.rsplit(",", 1)[1].strip(" %)"))


def test_colour_goes_from_blue_when_idle_to_red_when_busy() -> None:
    assert _hue(vertex_colour(0.0, 0.0)) == 210
    assert _hue(vertex_colour(1.0, 0.0)) == 0
    mid = _hue(vertex_colour(0.5, 0.0))
    assert 210 < mid < 360  # through violet, never through green
    assert vertex_colour(0.0, 0.0) != vertex_colour(0.3, 0.0)


def test_colour_turns_grey_then_black_as_backpressure_dominates() -> None:
    grey, black = vertex_colour(0.0, 0.3), vertex_colour(0.0, 1.0)
    assert grey.startswith("hsl(0, 0%") and black.startswith("hsl(0, 0%")
    assert _light(black) < _light(grey) <= 50
    # a little backpressure under Flink's "ok" threshold keeps the busy colour
    assert not vertex_colour(0.9, 0.05).startswith("hsl(0, 0%")


def test_colour_without_any_sample_is_neutral() -> None:
    assert vertex_colour(None, None) == "hsl(210, 15%, 55%)"


def _subtask(i: int, busy: int, bp: int, rate_out: float, wm: int | None = None) -> dict[str, Any]:
    return {
        "subtask": i, "status": "RUNNING", "attempt": 1, "taskmanager_id": f"h:{i}-a", "slot": i, "timestamps": {},
        "metrics": {"busyTimeMsPerSecond": busy, "backPressuredTimeMsPerSecond": bp, "idleTimeMsPerSecond": 1000 - busy - bp,
                    "numRecordsInPerSecond": 0.0, "numRecordsOutPerSecond": rate_out, "write-records": 100 * (i + 1),
                    "currentInputWatermark": wm},
    }


JOB_GRAPH = {
    "vertices": [
        {"id": "a", "name": "Source: s -> Map", "operators": [{"name": "Source: s"}, {"name": "Map"}]},
        {"id": "b", "name": "Sink", "operators": [{"name": "Sink: print"}]},
    ],
    "edges": [{"source_vertex": "a", "target_vertex": "b", "ship_strategy": "HASH"}],
}
VERTICES = [
    {"id": "a", "name": "Source: s -> Map", "parallelism": 3, "status": "RUNNING",
     "subtasks": [_subtask(0, 100, 800, 10.0, 5), _subtask(1, 300, 0, 20.0, 7), _subtask(2, 200, 100, 30.0)]},
    {"id": "b", "name": "Sink", "parallelism": 1, "status": "RUNNING", "subtasks": [_subtask(0, 900, 0, 0.0)]},
]


def test_vertex_figures_take_the_worst_subtask_and_sum_rates() -> None:
    f = vertex_figures(VERTICES[0])
    assert f.busy == 0.3 and f.backpressured == 0.8
    assert f.rate_out == 60.0 and f.records_out == 600
    assert f.low_watermark == 5
    ended = vertex_figures(VERTICES[0], live=False)
    assert ended.rate_out is None and ended.busy is None and ended.records_out == 600


def test_job_view_has_one_node_per_vertex_with_chained_names_and_labelled_edges() -> None:
    model = graph_model(JOB_GRAPH, VERTICES, live=True)
    assert [n.id for n in model.nodes] == ["a", "b"]
    assert model.nodes[0].operators == ("Source: s", "Map")
    assert model.nodes[0].colour == vertex_colour(0.3, 0.8)
    assert all(not n.subtasks for n in model.nodes)
    layout = model.layout_json()
    assert layout["edges"] == [{"source": "a", "target": "b", "label": "HASH"}]
    assert len(layout["nodes"]) == 2


def test_execution_view_expands_every_vertex_into_its_subtasks() -> None:
    job = graph_model(JOB_GRAPH, VERTICES, live=True, view="job")
    model = graph_model(JOB_GRAPH, VERTICES, live=True, view="execution")
    assert sum(len(n.subtasks) for n in model.nodes) == 4
    box = model.nodes[0].subtasks[1]
    assert (box.index, box.state, box.attempt, box.taskmanager, box.slot) == (1, "RUNNING", 1, "h:1-a", 1)
    # a vertex with more subtasks gets a taller box, so dagre leaves room for them
    assert model.nodes[0].height > model.nodes[1].height > job.nodes[1].height


def test_a_failed_vertex_is_red_and_says_why_without_opening_the_trace() -> None:
    from millstream.backend.ui.graph_view import FAILED_COLOUR, failure_lines
    from millstream.engine.jobmanager.job_store import ExceptionRecord

    failed = [dict(VERTICES[0]), dict(VERTICES[1], status="FAILED")]
    exceptions = [  # newest first
        ExceptionRecord("j", 2, "ValueError", "Traceback (most recent call last):\n  ...\nValueError: bad record 7\n", "Sink", "b"),
        ExceptionRecord("j", 1, "KeyError", "Traceback ...\nKeyError: 'x'", "Sink", "b"),
    ]
    lines = failure_lines(exceptions)
    assert lines == {"b": "ValueError: bad record 7"}
    ok = graph_model(JOB_GRAPH, VERTICES, live=False)
    model = graph_model(JOB_GRAPH, failed, live=False, failures=lines)
    assert model.nodes[1].colour == FAILED_COLOUR and model.nodes[1].failure == "ValueError: bad record 7"
    assert model.nodes[1].height > ok.nodes[1].height  # room for the message
    assert model.nodes[0].failure is None and model.nodes[0].colour != FAILED_COLOUR
