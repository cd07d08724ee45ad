"""Declared types through a real in-process job: what print() writes and execute_and_collect
returns. Expected outputs are what PyFlink 2.3.0 printed/returned for the same programs."""
import pytest

from millstream.engine.common.row import Row
from millstream.engine.common.typeinfo import Types
from millstream.engine.datastream.functions import ProcessFunction
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment

T = Types.TUPLE([Types.STRING(), Types.INT()])
R = Types.ROW_NAMED(["word", "n"], [Types.STRING(), Types.INT()])
DATA = [("a", 1), ("b", 2), ("a", 3)]


def _printed(capsys, build) -> list[str]:
    env = StreamExecutionEnvironment()
    build(env).print()
    env.execute()
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    "build,expected",
    [
        (lambda env: env.from_collection(DATA, T).map(lambda x: x), ["('a', 1)", "('b', 2)", "('a', 3)"]),
        (lambda env: env.from_collection(DATA, T).map(lambda x: x, output_type=T), ["(a,1)", "(b,2)", "(a,3)"]),
        (lambda env: env.from_collection(DATA, T).filter(lambda x: x[1] > 1), ["(b,2)", "(a,3)"]),
        (lambda env: env.from_collection(DATA, T).key_by(lambda x: x[0]), ["(a,1)", "(b,2)", "(a,3)"]),
        (lambda env: env.from_collection(DATA, T).key_by(lambda x: x[0]).sum(1), ["(a,1)", "(b,2)", "(a,4)"]),
        (lambda env: env.from_collection(DATA).key_by(lambda x: x[0]).sum(1), ["('a', 1)", "('b', 2)", "('a', 4)"]),
        (lambda env: env.from_collection(DATA, R).key_by(lambda x: x[0]).sum(1), ["+I[a,1]", "+I[b,2]", "+I[a,4]"]),
        (lambda env: env.from_collection(DATA, R).map(lambda r: r.word + str(r.n)), ["a1", "b2", "a3"]),
        (lambda env: env.from_collection(DATA, T).map(lambda x: x[1], output_type=Types.DOUBLE()), ["1.0", "2.0", "3.0"]),
        (lambda env: env.from_collection(DATA, T).map(lambda x: Row(x[0], x[1])), ["<Row('a', 1)>", "<Row('b', 2)>", "<Row('a', 3)>"]),
        (lambda env: env.from_collection(DATA, T).key_by(lambda x: x[0]).count_window(1)
            .reduce(lambda a, b: (a[0], a[1] + b[1])), ["(a,1)", "(b,2)", "(a,3)"]),
        (lambda env: env.from_collection(DATA, T).union(env.from_collection([("c", 9)], T)).rebalance(),
            None),  # checked below: both inputs keep the tuple form
    ],
)
def test_print_uses_the_declared_type(capsys, build, expected):
    lines = _printed(capsys, build)
    if expected is None:
        assert sorted(lines) == ["(a,1)", "(a,3)", "(b,2)", "(c,9)"]
    else:
        assert lines == expected


def test_side_output_prints_as_its_tag_type(capsys):
    tag = OutputTag("small", T)

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            yield tag, value

    def build(env):
        return env.from_collection(DATA, T).process(Split()).get_side_output(tag)

    assert _printed(capsys, build) == ["(a,1)", "(b,2)", "(a,3)"]


def test_collect_returns_the_declared_type():
    env = StreamExecutionEnvironment()
    with env.from_collection(DATA, R).execute_and_collect() as it:
        rows = list(it)
    assert rows == [Row(word="a", n=1), Row(word="b", n=2), Row(word="a", n=3)] and rows[0].word == "a"
    lists = env.from_collection(DATA, T).map(lambda x: [x[0]], output_type=Types.LIST(Types.STRING())).execute_and_collect()
    assert list(lists) == [["a"], ["b"], ["a"]]


def test_collect_untyped_records_come_back_exactly():
    env = StreamExecutionEnvironment()
    values = [[1, 2], bytearray(b"x"), (1,), {"a": [1]}, Row(x=1), {1, 2}]
    with env.from_collection(values).execute_and_collect() as it:
        out = list(it)
    assert out == values and [type(v) for v in out] == [type(v) for v in values]


def test_collect_with_limit_is_a_list_of_the_first_records():
    env = StreamExecutionEnvironment()
    out = env.from_collection(list(range(50)), Types.INT()).execute_and_collect(limit=5)
    assert out == [0, 1, 2, 3, 4]


def test_collect_keyed_stream_yields_key_and_record_rows():
    env = StreamExecutionEnvironment()
    out = list(env.from_collection(DATA, T).key_by(lambda x: x[0], key_type=Types.STRING()).execute_and_collect())
    assert out == [Row(f0="a", f1=("a", 1)), Row(f0="b", f1=("b", 2)), Row(f0="a", f1=("a", 3))]
    # Without key_type PyFlink leaves the key pickled (its bytes recorded from PyFlink 2.3.0).
    first = list(env.from_collection(DATA, T).key_by(lambda x: x[0]).execute_and_collect())[0]
    assert first.f0 == bytearray(b"\x80\x05\x95\x05\x00\x00\x00\x00\x00\x00\x00\x8c\x01a\x94.") and first.f1 == ("a", 1)


def test_from_collection_refuses_values_not_of_the_type():
    env = StreamExecutionEnvironment()
    with pytest.raises(ValueError, match="element 1"):
        env.from_collection([("a", 1), ("b",)], T)


def test_keyed_stream_print_drops_the_identifier_as_pyflink_does(capsys):
    env = StreamExecutionEnvironment()
    env.from_collection(DATA, T).key_by(lambda x: x[0]).print("id")
    env.from_collection(DATA[:1], T).print("id")
    env.execute()
    assert sorted(capsys.readouterr().out.splitlines()) == ["(a,1)", "(a,3)", "(b,2)", "id> (a,1)"]


def test_collect_floats_and_byte_arrays_as_pyflink_returns_them():
    env = StreamExecutionEnvironment()
    assert list(env.from_collection([0.1, 1.5], Types.FLOAT()).execute_and_collect()) == [0.1, 1.5]
    seen = list(env.from_collection([0.1], Types.FLOAT()).map(lambda x: x).execute_and_collect())
    assert seen == [0.10000000149011612]  # what a Python operator of a FLOAT stream receives
    out = env.from_collection(DATA, T).map(lambda x: x[0].encode(), output_type=Types.PRIMITIVE_ARRAY(Types.BYTE()))
    assert list(out.execute_and_collect()) == [[97], [98], [97]]


def test_connected_streams_print_as_their_output_type(capsys):
    from millstream.engine.datastream.functions import CoMapFunction

    class Both(CoMapFunction):
        def map1(self, value):
            return value

        def map2(self, value):
            return value

    def build(env):
        return env.from_collection(DATA[:1], T).connect(env.from_collection(DATA[1:2], T)).map(Both(), output_type=T)

    assert sorted(_printed(capsys, build)) == ["(a,1)", "(b,2)"]


def test_a_record_that_does_not_fit_the_declared_type_fails_the_job_clearly():
    from millstream.engine.common.job_execution_result import JobExecutionException

    env = StreamExecutionEnvironment()
    env.from_collection(DATA, T).map(lambda x: 5, output_type=T).print()
    with pytest.raises(JobExecutionException, match=r"does not fit the stream's declared type TupleTypeInfo"):
        env.execute()
