"""The small-BATCH-job parallelism of print sinks, against what PyFlink 2.3.0 printed for the same
pipelines in BATCH mode at parallelism 2 (recorded: ``A> 0`` without a subtask, ``E:1> 0`` with)."""
from __future__ import annotations

from millstream.engine.common.typeinfo import Types
from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.connectors.number_seq import NumberSequenceSource
from millstream.engine.datastream.execution_mode import RuntimeExecutionMode
from millstream.engine.graph.forward_groups import adaptive_batch_parallelism
from millstream.engine.graph.transformations import OperatorKind


def test_print_sinks_get_the_parallelism_pyflink_gave_them() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)

    def c():
        return env.from_collection(list(range(6)), type_info=Types.INT())

    def numbers():
        return env.from_source(NumberSequenceSource(0, 5), WatermarkStrategy.no_watermarks(), "n")

    c().print("A")
    c().map(lambda v: v).print("B")
    numbers().print("C")
    c().rebalance().print("D")
    c().map(lambda v: v).set_parallelism(2).print("E")
    c().key_by(lambda v: v % 2).reduce(lambda a, b: a + b).print("F")
    c().print("G").set_parallelism(2)
    numbers().map(lambda v: v).print("H")
    graph = env.get_stream_graph()
    printed = {
        graph.transformations[n].params.get("identifier"): adaptive_batch_parallelism(graph, n)
        for n, node in graph.nodes.items()
        if node.kind is OperatorKind.SINK
    }
    # PyFlink printed "A> 0" (one subtask) and "C:1> 3" (two) for these.
    assert printed == {"A": 1, "B": 1, "C": 2, "D": 1, "E": 2, "F": 1, "G": 2, "H": 2}
