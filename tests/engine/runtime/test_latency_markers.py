"""Latency markers: histograms and their Flink names (pure), markers riding in a RecordWriter's frames
to one channel without flushing, and a real in-process job whose results and user functions are the
same with markers on as off."""
from __future__ import annotations

import threading
from typing import Any

from millstream.engine.common.execution_config import ExecutionConfig
from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.execution_mode import RuntimeExecutionMode
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from millstream.engine.runtime.io.channel import ChannelId
from millstream.engine.runtime.io.frames import split_frame
from millstream.engine.runtime.io.local_channels import LocalChannelRegistry
from millstream.engine.runtime.io.record_writer import RecordWriter
from millstream.engine.runtime.io.serialization import LATENCY_MARKER, RECORDS, WATERMARK, MsgpackSerializer
from millstream.engine.runtime.latency_markers import (
    LatencyHistogram,
    LatencyMarker,
    LatencyStats,
    MarkerSchedule,
    latency_interval_ms,
    quantile,
    rest_values,
)
from millstream.engine.runtime.partitioner import create_partitioner
from millstream.engine.runtime.task_metrics import LATENCY_FIGURE, TaskIOMetrics

SER = MsgpackSerializer()


def test_quantiles_as_flinks_descriptive_statistics_estimate_them() -> None:
    values = [float(v) for v in range(1, 101)]
    assert quantile(values, 0.5) == 50.5
    assert quantile(values, 0.99) == 99.99
    assert quantile(values, 0.999) == 100.0
    assert quantile([7.0], 0.5) == 7.0


def test_a_histogram_keeps_the_last_history_values_and_counts_them_all() -> None:
    h = LatencyHistogram(history=4)
    for v in (100, 1, 2, 3, 4):
        h.update(v)
    stats = h.statistics()
    assert stats["count"] == 5 and stats["window"] == 4
    assert (stats["min"], stats["max"], stats["mean"]) == (1, 4, 2.5)
    assert LatencyHistogram().statistics() == {"count": 0}


def test_stats_per_source_and_chained_operator_named_as_flink_names_them() -> None:
    stats = LatencyStats(["op-a", "op-b"], subtask=1)
    stats.report(LatencyMarker(1_000, "src", 0), now_ms=1_012)
    stats.report(LatencyMarker(2_000, "src", 1), now_ms=2_004)
    stats.report(LatencyMarker(3_000, "src", 0), now_ms=2_999)  # a clock step back counts as 0, never negative
    snap = {(s, o, i): st for s, o, i, st in stats.snapshot()}
    assert set(snap) == {("src", "op-a", 1), ("src", "op-b", 1)}
    assert snap[("src", "op-a", 1)]["max"] == 12 and snap[("src", "op-a", 1)]["min"] == 0
    values = rest_values(stats.snapshot())
    name = "latency.source_id.src.operator_id.op-a.operator_subtask_index.1.latency"
    assert values[f"{name}_max"] == 12 and values[f"{name}_median"] == 4
    assert {k.rsplit("_", 1)[1] for k in values if k.startswith(name)} == {
        "min", "max", "mean", "stddev", "median", "p75", "p90", "p95", "p98", "p99", "p999"
    }


def test_the_schedule_emits_every_interval_without_catching_up_a_stall() -> None:
    s = MarkerSchedule(100, "src", 3, now_ms=0)
    assert s.due(99) is None
    assert s.due(100) == LatencyMarker(100, "src", 3)
    assert s.due(150) is None
    assert s.due(1_000) == LatencyMarker(1_000, "src", 3)
    assert s.due(1_050) is None  # one marker after a stall, not nine


def test_interval_comes_from_the_job_config_and_is_off_by_default() -> None:
    assert latency_interval_ms({}) == 0
    assert latency_interval_ms({"metrics.latency.interval": 250}) == 250
    assert latency_interval_ms({"metrics.latency.interval": -1}) == 0
    assert latency_interval_ms({"metrics.latency.interval": "bad"}) == 0
    env = StreamExecutionEnvironment.get_execution_environment()
    assert "metrics.latency.interval" not in env.get_config().to_job_config()  # -1: the cluster's setting
    env.get_config().set_latency_tracking_interval(50)
    assert env.get_config().to_job_config()["metrics.latency.interval"] == 50
    assert isinstance(env.get_config(), ExecutionConfig)


def test_task_metrics_carry_the_histograms_only_while_tracking_is_on() -> None:
    m = TaskIOMetrics()
    assert LATENCY_FIGURE not in m.sample()
    m.latency = LatencyStats(["op"], 0)
    m.latency.report(LatencyMarker(0, "src", 0), 5)
    assert m.sample()[LATENCY_FIGURE][0][:3] == ["src", "op", 0]


def _writer(n: int) -> tuple[RecordWriter, LocalChannelRegistry, list[ChannelId]]:
    reg = LocalChannelRegistry(8)
    factory = reg.factory(threading.Event())
    cids = [ChannelId("job", 1, 0, dst, 0) for dst in range(n)]
    strategy = "FORWARD" if n == 1 else "REBALANCE"
    writer = RecordWriter(create_partitioner(strategy, n), [factory.writer(c) for c in cids], SER, TaskIOMetrics(), 4, 10)
    return writer, reg, cids


def test_a_marker_waits_behind_the_records_of_one_channel_without_flushing_it() -> None:
    writer, reg, cids = _writer(1)
    writer.emit([1, 2], None)
    writer.emit_latency_marker([123, "src", 0])
    writer.emit_watermark(7)  # must not overwrite the marker as it overwrites an older watermark
    assert list(reg.channels[cids[0]].buffers) == []  # no flush: it travels with the records
    writer.flush_all()
    [frame] = reg.channels[cids[0]].buffers
    data_parts, parts = split_frame(frame)
    assert data_parts == 1  # the marker costs no records part: the consumer acks records buffers only
    assert [SER.decode(p)[0] for p in parts] == [RECORDS, LATENCY_MARKER, WATERMARK]
    assert SER.decode(parts[1])[1] == (123, "src", 0)


def test_a_marker_goes_to_one_channel_of_a_shuffle() -> None:
    writer, reg, cids = _writer(4)
    for _ in range(20):
        writer.emit_latency_marker([1, "src", 0])
    writer.flush_all()
    markers = sum(
        len(split_frame(e)[1]) for c in cids for e in reg.channels[c].buffers
    )
    assert markers == 20  # each marker once, never broadcast


class _Checked:
    """A user map that fails on anything but the records it was given."""

    def __call__(self, v: Any) -> Any:
        assert isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], int), v
        return (v[0], v[1] * 2)


def _run(interval: int | None) -> list[Any]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(2)
    if interval is not None:
        env.get_config().set_latency_tracking_interval(interval)
    # Rate-limited over about half a second, so sources emit markers between their batches.
    source = DataGeneratorSource(lambda i: (f"k{i % 5}", i), 3_000, records_per_second=6_000)
    out = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").key_by(lambda kv: kv[0]).map(_Checked())
        .key_by(lambda kv: kv[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    results = list(out.execute_and_collect())
    # A rolling reduce's intermediate sums depend on how the two map subtasks interleave; its count
    # and each key's final sum do not.
    finals: dict[str, int] = {}
    for key, total in results:
        finals[key] = max(finals.get(key, 0), total)
    return [len(results), sorted(finals.items())]


def test_markers_change_no_result_and_never_reach_a_user_function(monkeypatch: Any) -> None:
    seen: list[tuple[str, ...]] = []
    report = LatencyStats.report

    def counting(self: LatencyStats, marker: LatencyMarker, now_ms: int) -> None:
        seen.append(self.operator_ids)
        report(self, marker, now_ms)

    monkeypatch.setattr(LatencyStats, "report", counting)
    without = _run(None)
    assert seen == []
    assert _run(5) == without
    # Markers crossed both keyed shuffles: the map's tasks and the reduce's tasks recorded them.
    # (A source task has no operator of its own to measure: its markers leave it unrecorded.)
    assert len({ops for ops in seen if ops}) >= 2, set(seen)


def test_bad_settings_fall_back_instead_of_failing_the_task() -> None:
    from millstream.engine.runtime.latency_markers import DEFAULT_HISTORY, history_size

    assert history_size({}) == DEFAULT_HISTORY
    assert history_size({"metrics.latency.history-size": "many"}) == DEFAULT_HISTORY
    assert history_size({"metrics.latency.history-size": 0}) == DEFAULT_HISTORY  # 0 means unset, as None does
    assert history_size({"metrics.latency.history-size": 10**9}) == 100_000
