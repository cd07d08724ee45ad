"""Flink's metric-query shapes for a vertex and one subtask, over archived subtask samples (pure)."""
from __future__ import annotations

import pytest

from millstream.backend.services import metric_views
from millstream.backend.services.job_views import UnknownVertex
from millstream.engine.jobmanager.job_store import JobRecord

VID = "a" * 32


def record() -> JobRecord:
    def subtask(i: int, events: int) -> dict:
        metrics = {"Map.g.events": events, "Map.g.sizes": "DistributionResult{sum=3, count=2, min=1, max=2}",
                   "read-records": 10 * i, "attempt": 0, "tm": "tm-1", "ts": 5, "currentInputWatermark": None}
        return {"subtask": i, "status": "RUNNING", "metrics": metrics}

    vertex = {"id": VID, "name": "Map", "parallelism": 2, "subtasks": [subtask(0, 4), subtask(1, 6)]}
    return JobRecord(jid="b" * 32, name="m", state="RUNNING", job_type="STREAMING", start_time=1, end_time=-1,
                     last_modification=1, job_graph={}, timestamps={}, vertices=[vertex])


def test_vertex_metrics_are_listed_and_answered_by_subtask_as_strings() -> None:
    listed = [m["id"] for m in metric_views.vertex_metrics(record(), VID, [])]
    assert "0.Map.g.events" in listed and "1.read-records" in listed
    assert not any(i.endswith((".tm", ".ts", ".attempt", "Watermark")) for i in listed)  # bookkeeping and unset
    got = metric_views.vertex_metrics(record(), VID, ["1.Map.g.events", "0.Map.g.sizes", "9.nothing"])
    assert got == [
        {"id": "1.Map.g.events", "value": "6"},
        {"id": "0.Map.g.sizes", "value": "DistributionResult{sum=3, count=2, min=1, max=2}"},
    ]


def test_one_subtask_and_an_unknown_index() -> None:
    assert metric_views.subtask_metrics(record(), VID, 0, ["Map.g.events"]) == [{"id": "Map.g.events", "value": "4"}]
    with pytest.raises(UnknownVertex):
        metric_views.subtask_metrics(record(), VID, 5, [])
