"""``env.get_config()``: an ExecutionConfig whose meaningful settings reach the running job."""
from __future__ import annotations

import pytest

from millstream.engine.common.execution_config import ExecutionConfig
from millstream.engine.common.time import Duration
from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.datastream.functions import MapFunction
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from millstream.engine.graph.transformations import OperatorKind
from millstream.engine.runtime.operators.timestamps import TimestampsAndWatermarksOperator
from tests.operator_context import keyed_context


class _Param(MapFunction):
    def open(self, runtime_context):
        self.value = runtime_context.get_job_parameter("greeting", "unset")

    def map(self, value):
        return f"{self.value} {value}"


def test_get_config_is_an_execution_config_tied_to_the_environment():
    env = StreamExecutionEnvironment.get_execution_environment()
    config = env.get_config()
    assert isinstance(config, ExecutionConfig) and env.get_config() is config
    config.set_parallelism(3)
    assert env.get_parallelism() == 3 and config.get_parallelism() == 3
    config.set_max_parallelism(64)
    assert env.get_max_parallelism() == 64
    assert config.get_auto_watermark_interval() == 200  # Flink's default
    assert not config.is_object_reuse_enabled()
    assert config.enable_object_reuse() is config and config.is_object_reuse_enabled()
    with pytest.raises(ValueError):
        config.set_auto_watermark_interval(-1)


def test_global_job_parameters_reach_the_runtime_context():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_config().set_global_job_parameters({"greeting": "hello", "n": 3})
    assert env.get_config().get_global_job_parameters() == {"greeting": "hello", "n": "3"}
    assert sorted(env.from_collection(["a", "b"]).map(_Param()).execute_and_collect()) == ["hello a", "hello b"]
    # Setting them again replaces the whole set, as in Flink.
    env.get_config().set_global_job_parameters({"other": "x"})
    assert sorted(env.from_collection(["a"]).map(_Param()).execute_and_collect()) == ["unset a"]


def _timestamps_params(env: StreamExecutionEnvironment) -> dict:
    graph = env.get_stream_graph()
    (t,) = [t for t in graph.transformations.values() if t.kind is OperatorKind.TIMESTAMPS]
    return t.params


def test_the_auto_watermark_interval_reaches_the_watermark_operator():
    env = StreamExecutionEnvironment.get_execution_environment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(
        lambda e, ts: e
    )
    env.from_collection([1]).assign_timestamps_and_watermarks(strategy).print()
    assert _timestamps_params(env)["auto_watermark_interval"] == 200
    env.get_config().set_auto_watermark_interval(0)
    params = _timestamps_params(env)
    assert params["auto_watermark_interval"] == 0
    assert env._job_config()["pipeline.auto-watermark-interval"] == 0

    # With 0 the operator emits no periodic watermarks (only the final one at end of input), as Flink.
    now = [0]

    class Out:
        watermarks: list[int] = []

        def emit(self, values, timestamps):
            pass

        def emit_watermark(self, wm):
            self.watermarks.append(wm)

        def emit_status(self, idle):
            pass

    for interval, expected in ((0, []), (200, [999, 1499])):
        op = TimestampsAndWatermarksOperator(
            None,
            keyed_context("ts", lambda: now[0]),
            {**params, "auto_watermark_interval": interval, "auto_watermark_interval_explicit": False},
        )
        op.output = Out()
        op.output.watermarks = []
        op.open()
        op.process_batch([1000], None)
        now[0] += 1000
        op.on_tick(now[0])
        op.process_batch([1500], None)
        assert op.output.watermarks == expected, interval


def test_disabling_auto_generated_uids_requires_a_uid_on_every_operator():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_config().disable_auto_generated_uids()
    assert not env.get_config().has_auto_generated_uids_enabled()
    env.from_collection([1]).uid("src").map(str).print().uid("sink")
    with pytest.raises(RuntimeError, match="no UID or hash has been assigned to operator 'Map'"):
        env.get_job_graph()


def test_a_chosen_auto_watermark_interval_makes_watermarks_periodic():
    env = StreamExecutionEnvironment.get_execution_environment()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e)
    env.from_collection([1]).assign_timestamps_and_watermarks(strategy).print()
    assert _timestamps_params(env)["auto_watermark_interval_explicit"] is False  # default: after every batch
    env.get_config().set_auto_watermark_interval(1000)
    params = _timestamps_params(env)
    assert params["auto_watermark_interval_explicit"] is True

    now = [0]
    watermarks: list[int] = []

    class Out:
        def emit(self, values, timestamps):
            pass

        def emit_watermark(self, wm):
            watermarks.append(wm)

        def emit_status(self, idle):
            pass

    op = TimestampsAndWatermarksOperator(None, keyed_context("ts", lambda: now[0]), params)
    op.output = Out()
    op.open()
    op.process_batch([100], None)
    now[0] = 500
    op.on_tick(500)
    op.process_batch([600], None)
    assert watermarks == []  # within the first interval: nothing yet
    now[0] = 1000
    op.on_tick(1000)
    assert watermarks == [599]
    now[0] = 1200
    op.process_batch([1100], None)
    assert watermarks == [599]  # the next one waits for the interval
    now[0] = 2000
    op.process_batch([1900], None)
    assert watermarks == [599, 1899]
