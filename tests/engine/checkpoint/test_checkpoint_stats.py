"""Checkpoint statistics in Flink's REST shapes, percentiles, and the SQL record round trip."""
from __future__ import annotations

import json

from millstream.engine.checkpoint.config import CheckpointConfig, CheckpointingMode, ExternalizedCheckpointRetention
from millstream.engine.checkpoint.coordinator import CheckpointCoordinator
from millstream.engine.checkpoint.messages import TaskAck
from millstream.engine.checkpoint.stats import (
    checkpoint_config,
    checkpoint_details,
    checkpoints_overview,
    percentile,
    savepoint_operation,
    subtask_details,
    summary,
)
from millstream.engine.checkpoint.stats_tracker import CheckpointStats, CheckpointStatsTracker

JOB = "cd" * 16
TASKS = [("src", 0), ("win", 0), ("win", 1)]
SUMMARY_KEYS = {"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"}
ENTRY_KEYS = {
    "id", "status", "is_savepoint", "checkpoint_type", "trigger_timestamp", "latest_ack_timestamp",
    "state_size", "checkpointed_size", "end_to_end_duration", "alignment_buffered", "processed_data",
    "persisted_data", "num_subtasks", "num_acknowledged_subtasks", "tasks",
}


def make() -> CheckpointCoordinator:
    cfg = CheckpointConfig(interval_ms=1000, tolerable_failures=10, retained=2, storage_dir="/ck")
    return CheckpointCoordinator(JOB, cfg, TASKS[:1], TASKS)


def full_ack(i: int, base: int) -> TaskAck:
    return TaskAck(
        state_size=100 * (i + 1), checkpointed_size=10 * (i + 1), sync_ms=2, async_ms=30 + i, alignment_ms=5 * i,
        alignment_buffered_bytes=7, processed_bytes=1000, persisted_bytes=0, start_delay_ms=3 + i,
        ack_timestamp=base + 10 * (i + 1),
    )


def complete(c: CheckpointCoordinator, at: int) -> int:
    cid = c.trigger_checkpoint(at).checkpoint_id
    for i, t in enumerate(TASKS):
        c.receive_ack(cid, t, full_ack(i, at), at + 100)
    return cid


def test_percentiles_follow_commons_math_legacy_estimation() -> None:
    ten = [float(x) for x in range(1, 11)]
    assert percentile(ten, 50) == 5.5
    assert abs(percentile(ten, 90) - 9.9) < 1e-9
    assert percentile(ten, 99) == 10.0  # position past the end clamps to the maximum
    assert percentile(ten, 5) == 1.0  # position before the start clamps to the minimum
    hundred = [float(x) for x in range(1, 101)]
    assert abs(percentile(hundred, 95) - 95.95) < 1e-9
    assert percentile([], 50) == 0.0 and percentile([7.0], 99.9) == 7.0


def test_summary_shape_and_empty_summary() -> None:
    s = summary([4, 1, 3, 2])
    assert set(s) == SUMMARY_KEYS
    assert (s["min"], s["max"], s["avg"], s["p50"]) == (1, 4, 2, 2.5)
    assert summary([]) == {"min": 0, "max": 0, "avg": 0, "p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0}


def test_overview_counts_summary_latest_and_history() -> None:
    c = make()
    first = complete(c, 1000)
    second = complete(c, 2000)
    failed = c.trigger_checkpoint(3000).checkpoint_id
    c.receive_decline(failed, ("win", 1), "I/O error", 3050)
    in_progress = c.trigger_checkpoint(4000).checkpoint_id
    c.receive_ack(in_progress, ("src", 0), full_ack(0, 4000), 4010)
    sp = c.trigger_savepoint(5000, "/sp", "req").checkpoint_id
    for i, t in enumerate(TASKS):
        c.receive_ack(sp, t, full_ack(i, 5000), 5100)
    c.restore_latest(6000)

    o = json.loads(json.dumps(checkpoints_overview(c.stats)))
    assert o["counts"] == {"restored": 1, "total": 5, "in_progress": 1, "completed": 3, "failed": 1}
    assert set(o["summary"]) == {
        "checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered", "processed_data", "persisted_data",
    }
    assert all(set(v) == SUMMARY_KEYS for v in o["summary"].values())
    assert o["summary"]["state_size"]["max"] == 600  # 100 + 200 + 300
    assert o["summary"]["end_to_end_duration"]["min"] == 30  # the last ack, 30 ms after the trigger
    assert o["summary"]["processed_data"]["avg"] == 3000

    latest = o["latest"]
    assert latest["completed"]["id"] == second and latest["completed"]["external_path"] == f"/ck/{JOB}/chk-{second}"
    assert latest["completed"]["discarded"] is False
    assert latest["savepoint"]["id"] == sp and latest["savepoint"]["is_savepoint"] is True
    assert latest["savepoint"]["checkpoint_type"] == "SAVEPOINT"
    assert latest["failed"]["id"] == failed
    assert latest["failed"]["failure_timestamp"] == 3050 and "I/O error" in latest["failed"]["failure_message"]
    assert latest["restored"] == {"id": sp, "restore_timestamp": 6000, "is_savepoint": True, "external_path": latest["savepoint"]["external_path"]}

    history = o["history"]
    assert [h["id"] for h in history] == [sp, in_progress, failed, second, first]  # newest first
    assert [h["status"] for h in history] == ["COMPLETED", "IN_PROGRESS", "FAILED", "COMPLETED", "COMPLETED"]
    assert all(ENTRY_KEYS <= set(h) for h in history)
    pending = history[1]
    assert (pending["num_subtasks"], pending["num_acknowledged_subtasks"]) == (3, 1)
    assert "external_path" not in pending and "failure_message" not in pending
    assert pending["tasks"]["src"]["status"] == "COMPLETED" and pending["tasks"]["win"]["status"] == "IN_PROGRESS"
    done = history[3]
    assert done["tasks"]["win"] == {
        "id": second, "status": "COMPLETED", "latest_ack_timestamp": 2030, "state_size": 500,
        "checkpointed_size": 50, "end_to_end_duration": 30, "alignment_buffered": 14, "processed_data": 2000,
        "persisted_data": 0, "num_subtasks": 2, "num_acknowledged_subtasks": 2,
    }


def test_checkpoint_and_subtask_details() -> None:
    c = make()
    cid = c.trigger_checkpoint(1000).checkpoint_id
    c.receive_ack(cid, ("win", 1), full_ack(2, 1000), 1100)
    assert checkpoint_details(c.stats, cid)["status"] == "IN_PROGRESS"
    assert checkpoint_details(c.stats, 999) is None
    assert subtask_details(c.stats, cid, "nope") is None

    d = subtask_details(c.stats, cid, "win")
    assert d["num_subtasks"] == 2 and d["num_acknowledged_subtasks"] == 1
    assert d["subtasks"][0] == {"index": 0, "status": "pending_or_failed"}
    sub = d["subtasks"][1]
    assert sub["index"] == 1 and sub["status"] == "completed"
    assert sub["ack_timestamp"] == 1030 and sub["end_to_end_duration"] == 30
    assert (sub["state_size"], sub["checkpointed_size"]) == (300, 30)
    assert sub["checkpoint"] == {"sync": 2, "async": 32}
    assert sub["alignment"] == {"buffered": 7, "processed": 1000, "persisted": 0, "duration": 10}
    assert sub["start_delay"] == 5
    assert set(d["summary"]) == {"checkpointed_size", "state_size", "end_to_end_duration", "checkpoint_duration", "alignment", "start_delay"}
    assert d["summary"]["checkpoint_duration"]["async"]["max"] == 32
    assert set(d["summary"]["alignment"]) == {"buffered", "processed", "persisted", "duration"}


def test_checkpoint_config_shape() -> None:
    assert checkpoint_config(CheckpointConfig()) is None  # disabled: the route answers 404
    cfg = CheckpointConfig(
        interval_ms=3000, mode=CheckpointingMode.AT_LEAST_ONCE, min_pause_ms=100, max_concurrent=2,
        tolerable_failures=4, externalized=ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION, storage_dir="/ck",
    )
    j = checkpoint_config(cfg)
    assert j["mode"] == "at_least_once"
    assert (j["interval"], j["timeout"], j["min_pause"], j["max_concurrent"]) == (3000, 600_000, 100, 2)
    assert j["externalization"] == {"enabled": True, "delete_on_cancellation": False}
    assert j["checkpoint_storage"] == "FileSystemCheckpointStorage"
    assert j["unaligned_checkpoints"] is False and j["tolerable_failed_checkpoints"] == 4
    assert "state_backend" in j


def test_savepoint_operation_status() -> None:
    c = make()
    sp = c.trigger_savepoint(0, "/sp", "r1").checkpoint_id
    assert savepoint_operation(c.find_request("r1")) == {"status": {"id": "IN_PROGRESS"}, "operation": None}
    for i, t in enumerate(TASKS):
        c.receive_ack(sp, t, full_ack(i, 0), 50)
    done = savepoint_operation(c.find_request("r1"))
    assert done["status"]["id"] == "COMPLETED" and done["operation"]["location"].startswith("/sp/savepoint-")
    bad = c.trigger_savepoint(100, "/sp", "r2").checkpoint_id
    c.receive_decline(bad, ("src", 0), "source closed", 120)
    failed = savepoint_operation(c.find_request("r2"))
    assert failed["status"]["id"] == "COMPLETED" and "source closed" in failed["operation"]["failure-cause"]["stack-trace"]
    assert savepoint_operation(c.find_request("unknown")) is None


def test_records_are_plain_json_and_rebuild_the_same_answers() -> None:
    c = make()
    for at in (1000, 2000, 3000):
        complete(c, at)
    c.receive_decline(c.trigger_checkpoint(4000).checkpoint_id, ("src", 0), "x", 4001)
    c.trigger_checkpoint(5000)
    records = json.loads(json.dumps(c.stats.take_changed_records()))
    assert [r["id"] for r in records] == [1, 2, 3, 4, 5]
    assert records[0]["discarded"] is True  # retained=2 subsumed it
    assert CheckpointStats.from_record(records[2]).to_record() == records[2]

    rebuilt = CheckpointStatsTracker.from_records(records)
    assert checkpoints_overview(rebuilt) == checkpoints_overview(c.stats)
    assert subtask_details(rebuilt, 3, "win") == subtask_details(c.stats, 3, "win")


def test_history_is_bounded_but_counts_are_not() -> None:
    c = make()
    for i in range(15):
        complete(c, i * 1000)
    o = checkpoints_overview(c.stats)
    assert len(o["history"]) == 10 and o["history"][0]["id"] == 15
    assert o["counts"]["completed"] == 15
    assert c.stats.take_changed_records()[-1]["id"] == 15
