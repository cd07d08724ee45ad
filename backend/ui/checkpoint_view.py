"""View models of the job page's Checkpoints tab, built from Flink's checkpoint REST shapes
(``millstream.engine.checkpoint.stats``): counts, latest checkpoints, history, summary, configuration,
the chart's series, and one checkpoint's per-vertex and per-subtask detail.

Pure functions over plain dicts; ``millstream.backend.ui.context`` fetches the dicts.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from millstream.engine.checkpoint.config import CheckpointConfig, InvalidCheckpointConfig

CHART_POINTS = 300  # completed checkpoints drawn; the tracker keeps up to 10,000
ENABLE_HINT = "env.enable_checkpointing(ms)"


@dataclass(frozen=True)
class CheckpointRow:
    """One history entry (newest first in the table)."""

    id: int
    status: str  # IN_PROGRESS, COMPLETED, FAILED
    kind: str  # "checkpoint" or "savepoint"
    trigger_timestamp: int
    latest_ack_timestamp: int
    end_to_end_duration: int
    checkpointed_size: int
    state_size: int
    acknowledged: int
    subtasks: int
    external_path: str | None
    discarded: bool
    failure_message: str | None

    @property
    def in_progress(self) -> bool:
        return self.status == "IN_PROGRESS"


@dataclass(frozen=True)
class RestoredRow:
    id: int
    restore_timestamp: int
    kind: str
    external_path: str | None


@dataclass(frozen=True)
class SummaryRow:
    label: str
    unit: str  # "duration" or "bytes": which filter formats the figures
    min: float
    avg: float
    max: float
    p50: float
    p99: float


@dataclass(frozen=True)
class ConfigView:
    mode: str
    interval_ms: int
    timeout_ms: int
    min_pause_ms: int
    max_concurrent: int
    retained: int
    externalized: str  # what happens to retained checkpoints when the job ends
    storage: str
    storage_dir: str | None
    tolerable_failures: int


@dataclass(frozen=True)
class CheckpointsTab:
    counts: dict[str, int]
    latest_completed: CheckpointRow | None
    latest_failed: CheckpointRow | None
    latest_savepoint: CheckpointRow | None
    latest_restored: RestoredRow | None
    history: tuple[CheckpointRow, ...]
    summary: tuple[SummaryRow, ...]
    config: ConfigView | None
    series: dict[str, list[float]]  # uPlot columns over checkpoint ids

    @property
    def completed_any(self) -> bool:
        return self.counts.get("completed", 0) > 0


def checkpoint_row(e: Mapping[str, Any]) -> CheckpointRow:
    return CheckpointRow(
        id=int(e["id"]),
        status=str(e["status"]),
        kind="savepoint" if e.get("is_savepoint") else "checkpoint",
        trigger_timestamp=int(e["trigger_timestamp"]),
        latest_ack_timestamp=int(e.get("latest_ack_timestamp", -1)),
        end_to_end_duration=int(e.get("end_to_end_duration", -1)),
        checkpointed_size=int(e.get("checkpointed_size", 0)),
        state_size=int(e.get("state_size", 0)),
        acknowledged=int(e.get("num_acknowledged_subtasks", 0)),
        subtasks=int(e.get("num_subtasks", 0)),
        external_path=e.get("external_path"),
        discarded=bool(e.get("discarded", False)),
        failure_message=e.get("failure_message"),
    )


_SUMMARY = (
    ("end_to_end_duration", "End-to-end duration", "duration"),
    ("checkpointed_size", "Checkpointed data size", "bytes"),
    ("state_size", "Full checkpoint data size (state size)", "bytes"),
)


def config_view(rest: Mapping[str, Any] | None, config: CheckpointConfig | None) -> ConfigView | None:
    """``/checkpoints/config`` plus what Flink's answer leaves out: the number retained and the directory."""
    if rest is None:
        return None
    ext = rest.get("externalization") or {}
    if not ext.get("enabled"):
        externalized = "not retained when the job ends"
    elif ext.get("delete_on_cancellation"):
        externalized = "retained on failure, deleted on cancellation"
    else:
        externalized = "retained when the job fails or is cancelled"
    return ConfigView(
        mode=str(rest["mode"]).replace("_", " "),
        interval_ms=int(rest["interval"]),
        timeout_ms=int(rest["timeout"]),
        min_pause_ms=int(rest["min_pause"]),
        max_concurrent=int(rest["max_concurrent"]),
        retained=config.retained if config is not None else 1,
        externalized=externalized,
        storage=str(rest.get("checkpoint_storage", "")),
        storage_dir=config.storage_dir if config is not None else None,
        tolerable_failures=int(rest.get("tolerable_failed_checkpoints", 0)),
    )


def chart_series(completed: Iterable[tuple[int, Mapping[str, int]]]) -> dict[str, list[float]]:
    """uPlot columns for the last CHART_POINTS completed checkpoints: x is the checkpoint id."""
    points = list(completed)[-CHART_POINTS:]
    return {
        "x": [cid for cid, _ in points],
        "duration": [m.get("end_to_end_duration", 0) for _, m in points],
        "checkpointed": [m.get("checkpointed_size", 0) for _, m in points],
        "state": [m.get("state_size", 0) for _, m in points],
    }


def checkpoints_tab(
    overview: Mapping[str, Any],
    config: ConfigView | None,
    completed: Iterable[tuple[int, Mapping[str, int]]],
) -> CheckpointsTab:
    """``overview`` is ``/jobs/{id}/checkpoints``; ``completed`` the (id, summary metrics) of
    completed checkpoints, oldest first, for the chart."""
    latest = overview.get("latest") or {}
    restored = latest.get("restored")
    summary = overview.get("summary") or {}
    return CheckpointsTab(
        counts=dict(overview["counts"]),
        latest_completed=checkpoint_row(latest["completed"]) if latest.get("completed") else None,
        latest_failed=checkpoint_row(latest["failed"]) if latest.get("failed") else None,
        latest_savepoint=checkpoint_row(latest["savepoint"]) if latest.get("savepoint") else None,
        latest_restored=RestoredRow(
            int(restored["id"]), int(restored["restore_timestamp"]),
            "savepoint" if restored.get("is_savepoint") else "checkpoint", restored.get("external_path"),
        ) if restored else None,
        history=tuple(checkpoint_row(e) for e in overview.get("history", [])),
        summary=tuple(
            SummaryRow(label, unit, *(float(summary.get(key, {}).get(s, 0)) for s in ("min", "avg", "max", "p50", "p99")))
            for key, label, unit in _SUMMARY
        ),
        config=config,
        series=chart_series(completed),
    )


def configured_interval(job_config: Mapping[str, Any]) -> int | None:
    """The checkpoint interval a job was submitted with, or None when it had checkpointing off.
    Lets the tab tell "off" from "on, but its statistics are gone" (a JobManager restart)."""
    try:
        cfg = CheckpointConfig.from_job_config(job_config)
    except (InvalidCheckpointConfig, TypeError, ValueError):
        return None
    return cfg.interval_ms if cfg.is_checkpointing_enabled() else None


# -- one checkpoint, expanded -----------------------------------------------------------


@dataclass(frozen=True)
class SubtaskCheckpointRow:
    index: int
    acknowledged: bool
    ack_timestamp: int
    end_to_end_duration: int
    checkpointed_size: int
    state_size: int
    sync_ms: int
    async_ms: int
    alignment_ms: int
    alignment_buffered: int
    start_delay_ms: int


@dataclass(frozen=True)
class VertexCheckpoint:
    id: str
    name: str
    status: str
    latest_ack_timestamp: int
    end_to_end_duration: int
    checkpointed_size: int
    state_size: int
    alignment_buffered: int
    acknowledged: int
    subtasks: int
    rows: tuple[SubtaskCheckpointRow, ...]


@dataclass(frozen=True)
class CheckpointDetail:
    checkpoint: CheckpointRow
    vertices: tuple[VertexCheckpoint, ...]


def _subtask_row(s: Mapping[str, Any]) -> SubtaskCheckpointRow:
    if s.get("status") != "completed":
        return SubtaskCheckpointRow(int(s["index"]), False, -1, -1, -1, -1, -1, -1, -1, -1, -1)
    cp, al = s.get("checkpoint") or {}, s.get("alignment") or {}
    return SubtaskCheckpointRow(
        index=int(s["index"]),
        acknowledged=True,
        ack_timestamp=int(s["ack_timestamp"]),
        end_to_end_duration=int(s["end_to_end_duration"]),
        checkpointed_size=int(s["checkpointed_size"]),
        state_size=int(s["state_size"]),
        sync_ms=int(cp.get("sync", 0)),
        async_ms=int(cp.get("async", 0)),
        alignment_ms=int(al.get("duration", 0)),
        alignment_buffered=int(al.get("buffered", 0)),
        start_delay_ms=int(s.get("start_delay", 0)),
    )


def checkpoint_detail(
    details: Mapping[str, Any],
    subtasks: Mapping[str, Mapping[str, Any] | None],
    vertices: Sequence[Mapping[str, Any]],
) -> CheckpointDetail:
    """``details`` is ``/checkpoints/details/{cid}``; ``subtasks`` maps a vertex id to its
    ``.../subtasks/{vid}`` answer; ``vertices`` gives names and the graph's order."""
    tasks = details.get("tasks") or {}
    order = [v["id"] for v in vertices if v["id"] in tasks] + [vid for vid in tasks if vid not in {v["id"] for v in vertices}]
    names = {v["id"]: v["name"] for v in vertices}
    out = []
    for vid in order:
        t = tasks[vid]
        sub = subtasks.get(vid) or {}
        out.append(
            VertexCheckpoint(
                id=vid,
                name=names.get(vid, vid),
                status=str(t["status"]),
                latest_ack_timestamp=int(t["latest_ack_timestamp"]),
                end_to_end_duration=int(t["end_to_end_duration"]),
                checkpointed_size=int(t["checkpointed_size"]),
                state_size=int(t["state_size"]),
                alignment_buffered=int(t["alignment_buffered"]),
                acknowledged=int(t["num_acknowledged_subtasks"]),
                subtasks=int(t["num_subtasks"]),
                rows=tuple(_subtask_row(s) for s in sub.get("subtasks", [])),
            )
        )
    return CheckpointDetail(checkpoint_row(details), tuple(out))
