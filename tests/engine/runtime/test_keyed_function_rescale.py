"""On real StreamTasks: the keyed state of rich map, flat_map, filter and reduce functions after
key_by is checkpointed by key group, so a stop-with-savepoint and a resume at another parallelism
(and on the on-disk backend) go on counting each key where the savepoint left it."""
from __future__ import annotations

from collections import Counter

import pytest

from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.functions import FilterFunction, FlatMapFunction, MapFunction, ReduceFunction, RuntimeContext
from millstream.engine.datastream.state import ValueStateDescriptor
from millstream.engine.datastream.state_backend import EmbeddedRocksDBStateBackend
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from tests.engine.runtime.task_harness import TaskHarness, collect_sink

N = 3000
KEYS = 5
RATE = 1500  # a 2 s run: a slow start cannot let a source finish before the savepoint


def _event(i: int) -> tuple[int, int]:
    return (i % KEYS, i)


class Numbering(MapFunction):
    """Numbers each key's records 1, 2, 3... in ValueState."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", None))

    def map(self, value):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        return ("map", value[0], n)


class EveryTenth(FilterFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", None))

    def filter(self, value):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        return n % 10 == 0


class FirstOrAgain(FlatMapFunction):
    """Says whether the key was seen before (its state is None for a new key)."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", None))

    def flat_map(self, value):
        yield ("again" if self.seen.value() else "first", value[0])
        self.seen.update(True)


class CountingSum(ReduceFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.calls = runtime_context.get_state(ValueStateDescriptor("calls", None))

    def reduce(self, a, b):
        calls = (self.calls.value() or 0) + 1
        self.calls.update(calls)
        return (a[0], 0, calls)


def _job(parallelism: int, on_disk: bool = False) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    if on_disk:
        env.set_state_backend(EmbeddedRocksDBStateBackend())
    events = env.from_source(DataGeneratorSource(_event, N, RATE), None, "events")
    collect_sink(events.key_by(lambda e: e[0]).map(Numbering()).uid("numbering"))
    passed = events.key_by(lambda e: e[0]).filter(EveryTenth()).uid("tenth")
    collect_sink(passed.map(lambda e: ("tenth", e[0])))
    collect_sink(events.key_by(lambda e: e[0]).flat_map(FirstOrAgain()).uid("first"))
    reduced = events.key_by(lambda e: e[0]).reduce(CountingSum()).uid("sum")
    collect_sink(reduced.filter(lambda r: len(r) == 3 and r[2] % 100 == 0))
    return env


def _expected() -> Counter:
    out: Counter = Counter()
    per_key = N // KEYS
    for k in range(KEYS):
        out.update(("map", k, n) for n in range(1, per_key + 1))
        out[("tenth", k)] = per_key // 10
        out.update([("first", k)] + [("again", k)] * (per_key - 1))
        # reduce() runs from a key's second record on: its calls count 1 .. per_key - 1
        out.update((k, 0, 100 * j) for j in range(1, per_key // 100 + 1) if 100 * j < per_key)
    return out


@pytest.mark.parametrize(("before", "after", "on_disk"), [(2, 3, False), (3, 1, True)])
def test_keyed_function_state_resumes_per_key_at_another_parallelism(tmp_path, before, after, on_disk) -> None:
    first = TaskHarness(_job(before, on_disk), str(tmp_path)).start()
    first.await_output(100)
    first.trigger(1, "SYNC_SAVEPOINT", drain=False)
    savepoint = first.await_checkpoint(1)
    first.notify_complete(1)
    part1 = first.join()
    assert 0 < len(part1) < sum(_expected().values()), "the savepoint cut the run in the middle"
    part2 = TaskHarness(_job(after, on_disk), str(tmp_path), restore_from=savepoint).start().join()
    assert Counter(part1) + Counter(part2) == _expected()
