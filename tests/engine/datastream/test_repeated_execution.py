"""Several executions of one environment, as in Flink: each job is built from the transformations
added since the last execution and everything upstream of them, so streams stay usable after an
execution; sinks an earlier execution ran are not run again. Checked against PyFlink 2.3.0 (see the
x_runtime_execute_* conformance programs); run here on the in-process mini-cluster."""
from __future__ import annotations

import pytest

from millstream.engine.datastream import StreamExecutionEnvironment


def _env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)


def test_execute_and_collect_twice_on_streams_sharing_an_upstream() -> None:
    env = _env()
    shared = env.from_collection([1, 2, 3]).map(lambda x: x * 10)
    with shared.map(lambda x: x + 1).execute_and_collect() as first:
        assert sorted(first) == [11, 21, 31]
    assert sorted(shared.filter(lambda x: x > 10).execute_and_collect()) == [20, 30]
    assert sorted(shared.execute_and_collect()) == [10, 20, 30]


def test_a_second_execute_runs_only_the_new_sinks(capsys) -> None:
    env = _env()
    source = env.from_collection(["a", "b"])
    source.print("one")
    env.execute("first")
    assert sorted(capsys.readouterr().out.splitlines()) == ["one> a", "one> b"]
    source.map(str.upper).print("two")
    env.execute("second")
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == ["two> A", "two> B"]  # the first job's sink is not run again


def test_execute_with_nothing_new_is_refused_as_in_flink() -> None:
    env = _env()
    env.from_collection([1]).print()
    env.execute()
    with pytest.raises(RuntimeError, match="no operators defined"):
        env.execute()


def test_execute_and_collect_runs_the_collected_stream_alone_and_drops_pending_sinks(capsys) -> None:
    """PyFlink 2.3 runs only the collect sink's pipeline; a print() declared before it never runs,
    neither then nor in the next execute()."""
    env = _env()
    source = env.from_collection([1, 2])
    source.print("pending")
    assert sorted(source.map(lambda x: -x).execute_and_collect()) == [-2, -1]
    source.print("later")
    env.execute()
    assert sorted(capsys.readouterr().out.splitlines()) == ["later> 1", "later> 2"]


def test_execute_async_then_collect_from_the_same_source() -> None:
    env = _env()
    source = env.from_collection([5, 6])
    source.map(lambda x: x).print()
    env.execute_async("async").get_job_execution_result().result()
    assert sorted(source.execute_and_collect()) == [5, 6]


def test_each_job_graph_holds_only_its_own_operators() -> None:
    env = _env()
    source = env.from_collection([1])
    source.map(str).name("first map").print()
    first, _ = env.get_job_graph()
    env._executed()  # what execute() does once the job is submitted
    source.map(repr).name("second map").print()
    second, _ = env.get_job_graph()
    names = lambda jg: [op.name for v in jg.vertices for op in v.operators]  # noqa: E731
    assert "first map" in names(first) and "second map" not in names(first)
    assert "second map" in names(second) and "first map" not in names(second)
    assert "Source: Collection Source" in names(second)  # the shared source is built again
