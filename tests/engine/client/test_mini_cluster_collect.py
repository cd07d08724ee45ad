"""execute_and_collect in the in-process mini-cluster: bounded while unread, ``limit`` in order, closing cancels."""
from __future__ import annotations

from millstream.engine.common import Types, WatermarkStrategy
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.client.mini_cluster import MiniCluster
from millstream.engine.datastream.connectors import DataGeneratorSource
from millstream.engine.graph.transformations import OperatorKind
from tests.engine.progress import until


def _unbounded(env: StreamExecutionEnvironment):
    source = DataGeneratorSource(lambda i: i, None)
    return env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers", Types.LONG())


def test_an_unread_unbounded_job_waits_on_a_bounded_queue_and_closing_cancels_it() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)  # one source subtask: its records come in order (in-process runs default to a subtask per core)
    stream = _unbounded(env)
    sink = env._add(OperatorKind.SINK, "Collect Sink", (stream._id,), params={"sink": "collect"}, parallelism=1)
    job_graph, stream_graph = env.get_job_graph("unread")
    client = MiniCluster().submit(job_graph, stream_graph)
    it = client.collect(sink, None)
    queue = client.results.queue
    until(queue.full, "the unread queue to fill", timeout=10)
    # The sink tried again and again to put more and found no room: it waits, the queue stays bounded.
    refused = client.results.refused_puts
    until(lambda: client.results.refused_puts >= refused + 3, "the sink to retry its put on the full queue")
    assert queue.qsize() == queue.maxsize and client.get_job_status() == "RUNNING"  # the sink waits
    first = [next(it) for _ in range(3000)]
    assert first == list(range(3000))  # the waiting sink lost nothing and kept the order
    it.close()
    assert client.wait(10) and client.get_job_status() == "CANCELED"


def test_limit_returns_the_first_records_in_order_and_cancels_the_job() -> None:
    import threading

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    got = _unbounded(env).map(lambda x: x * 10, output_type=Types.LONG()).execute_and_collect(limit=5)
    assert got == [0, 10, 20, 30, 40]
    # The unbounded job was cancelled before the list came back: none of its task threads is left.
    assert not [t.name for t in threading.enumerate() if "numbers" in t.name]
