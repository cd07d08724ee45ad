"""The Checkpoints tab's view models and templates, fed by a real CheckpointStatsTracker
through the same REST-shape functions the JobManager serves."""
from __future__ import annotations

from types import SimpleNamespace

from millstream.backend.ui import checkpoint_view
from millstream.backend.ui.templating import block, templates
from millstream.engine.checkpoint import stats
from millstream.engine.checkpoint.config import CheckpointConfig, CheckpointingMode
from millstream.engine.checkpoint.messages import CheckpointType
from millstream.engine.checkpoint.stats_tracker import CheckpointStats, CheckpointStatsTracker, SubtaskStats

VERTICES = [{"id": "src", "name": "Source: numbers"}, {"id": "cnt", "name": "counts"}]


def _tracker() -> CheckpointStatsTracker:
    """#1 and #2 completed, #3 failed, #4 in progress with one of three subtasks acknowledged."""
    t = CheckpointStatsTracker()
    for cid in (1, 2, 3, 4):
        t.report_pending(CheckpointStats(cid, CheckpointType.CHECKPOINT, 1000 * cid, {"src": 1, "cnt": 2}))
    for cid in (1, 2):
        t.report_ack(cid, "src", SubtaskStats(0, 1000 * cid + 20, state_size=100, checkpointed_size=100, start_delay_ms=3))
        for i in (0, 1):
            t.report_ack(cid, "cnt", SubtaskStats(i, 1000 * cid + 40 * cid, state_size=2048 * cid, checkpointed_size=1024 * cid,
                                                   sync_ms=2, async_ms=7, alignment_ms=5, alignment_buffered=300))
        t.report_completed(cid, f"/cp/chk-{cid}")
    t.report_failed(3, 3500, "Checkpoint expired before completing.")
    t.report_ack(4, "cnt", SubtaskStats(1, 4010, state_size=10))
    return t


def _config() -> CheckpointConfig:
    return CheckpointConfig(interval_ms=300, mode=CheckpointingMode.EXACTLY_ONCE, retained=3, storage_dir="/var/cp")


def _tab(t: CheckpointStatsTracker) -> checkpoint_view.CheckpointsTab:
    cfg = checkpoint_view.config_view(stats.checkpoint_config(_config()), _config())
    return checkpoint_view.checkpoints_tab(stats.checkpoints_overview(t), cfg, list(t.summary))


def test_the_tab_model_holds_counts_latest_history_summary_and_the_chart() -> None:
    tab = _tab(_tracker())
    assert tab.counts == {"restored": 0, "total": 4, "in_progress": 1, "completed": 2, "failed": 1}
    assert tab.latest_completed.id == 2 and tab.latest_completed.external_path == "/cp/chk-2"
    assert tab.latest_failed.failure_message == "Checkpoint expired before completing."
    assert tab.latest_savepoint is None and tab.latest_restored is None
    assert [(r.id, r.status, r.acknowledged, r.subtasks) for r in tab.history] == [
        (4, "IN_PROGRESS", 1, 3), (3, "FAILED", 0, 3), (2, "COMPLETED", 3, 3), (1, "COMPLETED", 3, 3)
    ]
    duration = tab.summary[0]
    assert (duration.label, duration.min, duration.max) == ("End-to-end duration", 40, 80)
    assert tab.series == {"x": [1, 2], "duration": [40, 80], "checkpointed": [2148, 4196], "state": [4196, 8292]}
    assert tab.config.retained == 3 and tab.config.mode == "exactly once" and tab.config.storage_dir == "/var/cp"


def test_an_expanded_checkpoint_lists_every_vertex_and_subtask_in_graph_order() -> None:
    t = _tracker()
    detail = checkpoint_view.checkpoint_detail(
        stats.checkpoint_details(t, 4), {v: stats.subtask_details(t, 4, v) for v in ("src", "cnt")}, VERTICES
    )
    assert [v.name for v in detail.vertices] == ["Source: numbers", "counts"]
    cnt = detail.vertices[1]
    assert [(s.index, s.acknowledged) for s in cnt.rows] == [(0, False), (1, True)]
    done = checkpoint_view.checkpoint_detail(stats.checkpoint_details(t, 2), {"cnt": stats.subtask_details(t, 2, "cnt")}, VERTICES)
    row = done.vertices[1].rows[0]
    assert (row.sync_ms, row.async_ms, row.alignment_ms, row.alignment_buffered, row.end_to_end_duration) == (2, 7, 5, 300, 80)


def _header(alive: bool = True) -> SimpleNamespace:
    return SimpleNamespace(jid="a" * 32, alive=alive)


def test_the_blocks_render_rows_that_open_and_a_preserved_detail_row_each() -> None:
    ctx = {"header": _header(), "checkpoints": _tab(_tracker())}
    history = block("job/checkpoints.html", "history", **ctx)
    assert history.count('class="cp-toggle"') == 4
    assert f'data-detail="/ui/jobs/{"a" * 32}/checkpoints/details/4"' in history
    assert history.count('hx-preserve="true"') == 4 and 'id="cp-detail-2"' in history
    assert "Checkpoint expired before completing." in history
    counts = block("job/checkpoints.html", "counts", **ctx)
    assert 'id="cp-completed">2<' in counts and "No checkpoint completed yet" not in counts
    summary = block("job/checkpoints.html", "summary", **ctx)
    assert "<td class=\"num\">80 ms</td>" in summary and "4.1 KiB" in summary  # the maxima, formatted


def test_empty_states_say_off_gone_or_not_yet() -> None:
    page = templates.env.get_template("job/checkpoints.html")
    off = page.render(header=_header(), checkpoints=None, configured_interval=None)
    assert "Checkpointing is off for this job (enable it with <code>env.enable_checkpointing(ms)</code>)" in off
    gone = page.render(header=_header(False), checkpoints=None, configured_interval=300)
    assert "every 300 ms" in gone and "Checkpointing is off" not in gone
    empty = _tab(CheckpointStatsTracker())
    html = page.render(header=_header(), checkpoints=empty, configured_interval=300, cp_series_json="null")
    assert "No checkpoint completed yet." in html and "then every 300 ms" in html
    assert "No checkpoint triggered yet." in html and 'sse-swap="cp-history"' in html


def test_configured_interval_tells_off_from_on() -> None:
    assert checkpoint_view.configured_interval({}) is None
    assert checkpoint_view.configured_interval({"execution.checkpointing.interval": "2 s"}) == 2000
