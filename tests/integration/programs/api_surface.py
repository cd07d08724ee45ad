"""window_all, count_window_all, field-name aggregations and job parameters through PyFlink's API;
prints {case: sorted results} as JSON. Usage: api_surface.py CASE [CASE...]"""
import json
import sys

from pyflink.common import Row, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AllWindowFunction, MapFunction, ProcessAllWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows

EVENTS = [(f"e{i}", (i * 37) % 5000) for i in range(400)]
ROWS = [(f"k{i % 7}", i % 11, i) for i in range(300)]


class Stamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class WindowContents(ProcessAllWindowFunction):
    def open(self, runtime_context):
        self.subtasks = runtime_context.get_number_of_parallel_subtasks()

    def process(self, context, elements):
        names = sorted(e[0] for e in elements)
        yield [context.window().start, len(names), names[0], self.subtasks]


class Counted(AllWindowFunction):
    def apply(self, window, inputs):
        yield [sum(v for v in inputs)]


class Param(MapFunction):
    def open(self, runtime_context):
        self.tag = runtime_context.get_job_parameter("tag", "missing")

    def map(self, value):
        return [self.tag, value]


def run(case):
    env = StreamExecutionEnvironment.get_execution_environment()
    if case == "window_all":
        # Monotonous per subtask is enough: each timestamping subtask sees its records in order.
        ordered = sorted(EVENTS, key=lambda e: e[1])
        ds = env.from_collection(ordered).assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Stamp())
        ).rebalance().map(lambda v: v)
        out = ds.window_all(TumblingEventTimeWindows.of(Time.seconds(1))).process(WindowContents())
    elif case == "count_window_all":
        out = env.from_collection(list(range(100))).rebalance().map(lambda v: v).count_window_all(10).apply(Counted())
    elif case == "field_name_sum":
        t = Types.ROW_NAMED(["key", "count", "seq"], [Types.STRING(), Types.INT(), Types.INT()])
        keyed = env.from_collection(ROWS, type_info=t).key_by(lambda r: r.key, key_type=Types.STRING())
        out = keyed.sum("count").map(lambda r: [r.key, r["count"], r.seq])
    elif case == "job_parameters":
        env.get_config().set_global_job_parameters({"tag": "from-config"})
        out = env.from_collection([1, 2, 3]).map(Param())
    else:
        raise SystemExit(f"unknown case {case}")
    return sorted(json.loads(json.dumps([list(r) if isinstance(r, (tuple, list, Row)) else r for r in out.execute_and_collect(case)])))


if __name__ == "__main__":
    print(json.dumps({case: run(case) for case in sys.argv[1:]}))
