"""A BATCH job's print() on Spark writes the same per-type forms as the streaming runtime."""
from millstream.engine.common.row import Row
from millstream.engine.common.type_formatting import record_formatter
from millstream.engine.common.typeinfo import Types
from millstream.engine.spark.partitions import print_partition
from tests.spark.conftest import batch_env


def test_print_partition_formats_by_declared_type():
    out: list[str] = []
    t = Types.TUPLE([Types.STRING(), Types.INT()])
    print_partition(None, 2, out.append, fmt=record_formatter(t))(0, iter([("a", 1), ["b", 2]]))
    print_partition("r", 1, out.append, fmt=record_formatter(Types.ROW([Types.STRING()])))(0, iter([Row("x")]))
    assert "".join(out) == "1> (a,1)\n1> (b,2)\nr> +I[x]\n"


def test_the_print_sink_carries_its_stream_type_to_the_translator():
    t = Types.TUPLE([Types.STRING(), Types.INT()])

    env = batch_env()
    env.from_collection([("a", 1)], type_info=t).map(lambda x: x, output_type=t).print()
    _, stream_graph = env.get_job_graph()
    sink = next(tr for tr in stream_graph.transformations.values() if tr.params.get("sink") == "print")
    assert sink.params["type_info"] == t
