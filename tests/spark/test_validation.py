"""Refusal at submission: the JobGraph alone (no user code, no Spark) says whether a bounded job can run on Spark."""
from __future__ import annotations

import json

import pytest

from millstream.engine.common.time import Time
from millstream.engine.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from millstream.engine.datastream.window import (
    ContinuousEventTimeTrigger,
    CountEvictor,
    CountTrigger,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    TumblingEventTimeWindows,
)
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.spark.validation import BY_WINDOW, COUNT, MERGING, UntranslatableJob, check_job_graph, window_shape
from tests.spark.conftest import capture


def _keyed(env):
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Stamp())
    return env.from_collection([("a", 1, 5)]).assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0])


class _Stamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


def _window_of(job_graph: JobGraph):
    (op,) = [op for v in job_graph.vertices for op in v.operators if op.kind == "Window"]
    return op


def _through_json(job_graph: JobGraph) -> JobGraph:
    """What the Dispatcher receives: the JobGraph as the client posts it."""
    return JobGraph.from_dict(json.loads(json.dumps(job_graph.to_dict())))


@pytest.mark.parametrize(
    "build, shape",
    [
        (lambda k: k.window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(max), BY_WINDOW),
        (lambda k: k.window(SlidingEventTimeWindows.of(Time.seconds(2), Time.seconds(1))).reduce(max), BY_WINDOW),
        (
            lambda k: k.window(TumblingEventTimeWindows.of(Time.seconds(1))).trigger(EventTimeTrigger.create()).reduce(max),
            BY_WINDOW,
        ),
        (lambda k: k.window(EventTimeSessionWindows.with_gap(Time.seconds(1))).reduce(max), MERGING),
        (lambda k: k.count_window(3).reduce(max), COUNT),  # PurgingTrigger(CountTrigger) by default
        (lambda k: k.count_window(3, 1).reduce(max), COUNT),
        (lambda k: k.window(GlobalWindows.create()).reduce(max), COUNT),  # fires once, at the end
        (lambda k: k.window(GlobalWindows.create()).trigger(CountTrigger.of(2)).evictor(CountEvictor.of(1)).reduce(max), COUNT),
        (
            lambda k: k.window(GlobalWindows.create()).trigger(PurgingTrigger.of(CountTrigger.of(2))).reduce(max),
            COUNT,
        ),
    ],
    ids=["tumbling", "sliding", "explicit-event-time-trigger", "session", "count", "sliding-count", "global",
         "count-evictor", "purging-count"],
)
def test_translatable_windows_pass_and_get_their_shape(build, shape):
    job_graph = _through_json(capture(lambda env: build(_keyed(env)))[0])
    check_job_graph(job_graph)
    op = _window_of(job_graph)
    assert window_shape(op.name, op.window) == shape


@pytest.mark.parametrize(
    "build, refused",
    [
        (
            lambda k: k.window(TumblingEventTimeWindows.of(Time.seconds(1)))
            .trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(100)))
            .reduce(max),
            "the trigger ContinuousEventTimeTrigger is not translated",
        ),
        (
            lambda k: k.window(TumblingEventTimeWindows.of(Time.seconds(1))).trigger(CountTrigger.of(5)).reduce(max),
            "the trigger CountTrigger is not translated; event-time windows fire once",
        ),
        (
            lambda k: k.window(SlidingEventTimeWindows.of(Time.seconds(2), Time.seconds(1)))
            .evictor(CountEvictor.of(1))
            .reduce(max),
            "the evictor CountEvictor is not translated; only count windows take an evictor",
        ),
        (
            lambda k: k.window(GlobalWindows.create()).trigger(ProcessingTimeTrigger.create()).reduce(max),
            "the trigger ProcessingTimeTrigger is not translated; count windows take a CountTrigger",
        ),
        (
            lambda k: k.count_window(3).evictor(TimeEvictor.of(10)).reduce(max),
            "the evictor TimeEvictor is not translated; count windows take a CountEvictor",
        ),
        (
            lambda k: k.window(SlidingProcessingTimeWindows.of(Time.seconds(2), Time.seconds(1))).reduce(max),
            "SlidingProcessingTimeWindows assigns by the wall clock",
        ),
    ],
    ids=["continuous-trigger", "count-trigger-on-time-windows", "evictor-on-time-windows", "processing-trigger",
         "time-evictor-on-count-windows", "processing-time-assigner"],
)
def test_untranslatable_windows_are_refused_from_the_job_graph_alone(build, refused):
    job_graph = _through_json(capture(lambda env: build(_keyed(env)))[0])
    with pytest.raises(UntranslatableJob, match=rf"operator 'Window\(.*\)' cannot run on Spark: {refused}"):
        check_job_graph(job_graph)


def test_a_user_trigger_named_like_a_known_one_is_still_refused():
    class EventTimeTrigger(ContinuousEventTimeTrigger):  # same short name, different class
        pass

    job_graph, _ = capture(
        lambda env: _keyed(env)
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .trigger(EventTimeTrigger(100))
        .reduce(max)
    )
    assert _window_of(job_graph).window.trigger[0].endswith("<locals>.EventTimeTrigger")
    with pytest.raises(UntranslatableJob, match="the trigger EventTimeTrigger is not translated"):
        check_job_graph(_through_json(job_graph))


def test_window_descriptor_is_not_part_of_flinks_plan_json():
    job_graph, _ = capture(lambda env: _keyed(env).window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(max))
    plan = job_graph.to_plan()
    assert all(set(n) <= {"id", "parallelism", "operator", "operator_strategy", "description",
                          "optimizer_properties", "inputs"} for n in plan["nodes"])
    window = _window_of(job_graph).window
    assert window.assigner == "millstream.engine.windowing.assigners.TumblingEventTimeWindows"
    assert window.trigger == ("millstream.engine.windowing.triggers.EventTimeTrigger",) and window.evictor is None
    assert _window_of(_through_json(job_graph)).window == window


def test_a_window_without_its_descriptor_is_refused():
    job_graph, _ = capture(lambda env: _keyed(env).window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(max))
    d = job_graph.to_dict()
    for v in d["vertices"]:
        for o in v["operators"]:
            o.pop("window")
    with pytest.raises(UntranslatableJob, match="does not describe its window"):
        check_job_graph(JobGraph.from_dict(d))


def test_malformed_window_descriptor_is_refused_saying_what_is_wrong():
    job_graph, _ = capture(lambda env: _keyed(env).window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(max))
    d = job_graph.to_dict()
    for v in d["vertices"]:
        for o in v["operators"]:
            if o["window"]:
                o["window"] = {"assigner": "x"}
    with pytest.raises(ValueError, match=r"a window descriptor needs the fields \['assigner', .*got \['assigner'\]"):
        JobGraph.from_dict(d)  # the REST layer answers it with 400 "malformed JobGraph"


def test_a_monitoring_file_source_is_refused_as_unbounded(tmp_path):
    from millstream.engine.common.time import Duration
    from millstream.engine.datastream.connectors.file_system import FileSource, StreamFormat

    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
        .monitor_continuously(Duration.of_seconds(1))
        .build()
    )
    job_graph, _ = capture(lambda env: env.from_source(source, None, "watched"))
    with pytest.raises(UntranslatableJob, match="operator 'Source: watched' cannot run on Spark: it is an unbounded source"):
        check_job_graph(_through_json(job_graph))
