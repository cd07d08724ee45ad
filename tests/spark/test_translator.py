"""The same bounded programs on the native MiniCluster and translated to Spark give the same results."""
from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.connectors.number_seq import NumberSequenceSource
from millstream.engine.datastream.functions import (
    FlatMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    RuntimeContext,
    SinkFunction,
)
from millstream.engine.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from millstream.engine.spark.partitions import print_partition
from millstream.engine.spark.translator import UntranslatableJob, translate
from tests.spark.conftest import batch_env, capture, run_native, run_spark

WORDS = ["to be or not to be", "that is the question", "to sleep perchance to dream", "", "be be be"]


def both(sc: Any, program, parallelism: int = 2) -> tuple[list[Any], list[Any]]:
    native = sorted(run_native(program, parallelism), key=repr)
    spark = sorted(run_spark(sc, program, parallelism), key=repr)
    return native, spark


def word_count(env):
    return (
        env.from_collection(WORDS)
        .flat_map(lambda line: [(w, 1) for w in line.split()])
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )


def test_word_count(sc):
    native, spark = both(sc, word_count)
    assert spark == native
    assert ("be", 5) in spark and ("to", 4) in spark


def _pairs(env, parallelism: int | None = None):
    # (key, unique value): min/max keep the first record's other fields, so only the key may repeat.
    numbers = env.from_source(NumberSequenceSource(1, 500), None, "numbers")
    if parallelism is not None:
        numbers = numbers.set_parallelism(parallelism)
    pairs = numbers.map(lambda n: ("k%d" % (n % 7), n * 37 % 1009))
    return pairs if parallelism is None else pairs.set_parallelism(parallelism)


@pytest.mark.parametrize("aggregation", ["sum", "min", "max", "min_by", "max_by"])
def test_keyed_aggregations(sc, aggregation):
    def program(env):
        return getattr(_pairs(env).key_by(lambda t: t[0]), aggregation)(1)

    native, spark = both(sc, program)
    assert spark == native
    assert len(spark) == 7  # BATCH: one final value per key


def test_union_filter_flat_map_and_parallelism_changes(sc):
    class Twice(FlatMapFunction):
        def flat_map(self, value):
            yield value
            yield -value

    def program(env):
        a = env.from_source(NumberSequenceSource(1, 300), None, "a")
        b = env.from_collection(list(range(1000, 1100)))
        c = env.from_source(NumberSequenceSource(5000, 5010), None, "c").set_parallelism(3).rebalance()
        return a.union(b, c).filter(lambda n: n % 3 == 0).flat_map(Twice()).rescale().map(lambda n: n + 1).set_parallelism(1)

    native, spark = both(sc, program)
    assert spark == native
    assert len(spark) == 2 * (100 + 33 + 4)


def test_broadcast_delivers_each_record_once_per_instance(sc):
    def program(env):
        return env.from_collection([1, 2, 3]).broadcast().map(lambda n: n * 10).set_parallelism(3)

    native, spark = both(sc, program)
    assert spark == native == sorted([10, 20, 30] * 3)


def test_partition_custom_sends_each_record_to_the_partition_the_partitioner_names(sc):
    class Index(MapFunction):
        def open(self, runtime_context: RuntimeContext) -> None:
            self.index = runtime_context.get_index_of_this_subtask()

        def map(self, value):
            return value, self.index

    def program(env):
        ds = env.from_collection(list(range(12)))
        return ds.partition_custom(lambda key, n: key % n, lambda v: v * 2 + 1).map(Index()).set_parallelism(3)

    native, spark = both(sc, program)
    assert spark == native == sorted(((v, (v * 2 + 1) % 3) for v in range(12)), key=repr)


class CountPerKey(KeyedProcessFunction):
    """Keyed state of every kind: a running count, the values seen, and a per-parity tally."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen"))
        self.parity = runtime_context.get_map_state(MapStateDescriptor("parity"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        self.seen.add(value[1])
        p = value[1] % 2
        self.parity.put(p, (self.parity.get(p) or 0) + 1)
        yield ctx.get_current_key(), n, len(list(self.seen.get())), self.parity.get(p)


def test_keyed_process_function_with_state(sc):
    # The per-parity tally depends on each key's record order. From two source subtasks that order is
    # the channels' interleaving, which differs from run to run in Flink too; one source gives every key
    # one order (its channel's) in both runners.
    def program(env):
        return _pairs(env, parallelism=1).key_by(lambda t: t[0]).process(CountPerKey())

    native, spark = both(sc, program)
    assert spark == native
    assert len(spark) == 500
    assert max(r[1] for r in spark) == 72  # 500 records over 7 keys: at most 72 per key


def test_keyed_process_sees_input_order_within_a_key(sc):
    class Previous(KeyedProcessFunction):
        def open(self, runtime_context):
            self.last = runtime_context.get_state(ValueStateDescriptor("last"))

        def process_element(self, value, ctx):
            yield value, self.last.value()
            self.last.update(value)

    def program(env):
        # one upstream partition, so "input order" is defined: each record follows its predecessor
        return env.from_collection(list(range(40))).key_by(lambda n: n % 4).process(Previous())

    native, spark = both(sc, program)
    assert spark == native
    assert (9, 5) in spark and (0, None) in spark


def test_map_function_lifecycle_and_runtime_context_match_native_subtasks(sc):
    class Tag(MapFunction):
        def open(self, runtime_context):
            self.index = runtime_context.get_index_of_this_subtask()
            self.parallelism = runtime_context.get_number_of_parallel_subtasks()

        def map(self, value):
            return self.index, self.parallelism, value

    def program(env):
        return env.from_source(NumberSequenceSource(0, 99), None, "n").map(Tag())

    native, spark = both(sc, program)
    assert spark == native  # the same split per subtask as native sources
    assert {r[0] for r in spark} == {0, 1}


def test_process_function_and_bounded_data_generator(sc):
    class Odd(ProcessFunction):
        def process_element(self, value, ctx):
            if value % 2:
                return [value, value]
            return None

    def program(env):
        gen = DataGeneratorSource(lambda i: i * 3, count=200)
        return env.from_source(gen, None, "gen").process(Odd())

    native, spark = both(sc, program)
    assert spark == native and len(spark) == 200


def test_user_sink_function_runs_once_per_partition(sc, tmp_path):
    class FileSink(SinkFunction):
        def __init__(self, directory: str) -> None:
            self.directory = directory

        def open(self, runtime_context):
            path = os.path.join(self.directory, str(runtime_context.get_index_of_this_subtask()))
            self.f = open(path, "w")

        def invoke(self, value, context):
            self.f.write(f"{value}\n")

        def close(self):
            self.f.close()

    env = batch_env(2)
    env.from_source(NumberSequenceSource(1, 50), None, "n").add_sink(FileSink(str(tmp_path)))
    job_graph, stream_graph = env.get_job_graph("sink")
    translate(sc, job_graph, stream_graph).run(sc, lambda n, b: None)
    assert sorted(os.listdir(tmp_path)) == ["0", "1"]
    lines = [int(x) for p in tmp_path.iterdir() for x in p.read_text().split()]
    assert sorted(lines) == list(range(1, 51))


def test_print_prefixes_like_flink():
    out: list[str] = []
    print_partition(None, 2, out.append)(1, iter([("a", 1), "b"]))
    print_partition("id", 1, out.append)(0, iter([3]))
    assert "".join(out) == "2> ('a', 1)\n2> b\nid> 3\n"


def test_unbounded_source_is_refused_naming_the_operator(sc):
    def program(env):
        return env.from_source(DataGeneratorSource(lambda i: i, count=None), None, "endless").map(lambda x: x)

    job_graph, stream_graph = capture(program)
    with pytest.raises(UntranslatableJob, match="'Source: endless'.*unbounded"):
        translate(sc, job_graph, stream_graph)


def test_cancel_via_job_group(sc):
    def program(env):
        slow = DataGeneratorSource(lambda i: i, count=10_000_000, records_per_second=200)
        return env.from_source(slow, None, "slow").map(lambda x: x)

    job_graph, stream_graph = capture(program)
    plan = translate(sc, job_graph, stream_graph)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            plan.run(sc, lambda n, b: None, job_group="cancel-me")
        except BaseException as e:  # the cancelled Spark job surfaces as an error
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 30
    while not sc.statusTracker().getJobIdsForGroup("cancel-me") and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    started = time.monotonic()
    sc.cancelJobGroup("cancel-me")
    t.join(30)
    assert not t.is_alive()
    assert time.monotonic() - started < 20
    assert errors and "cancel" in str(errors[0]).lower()
