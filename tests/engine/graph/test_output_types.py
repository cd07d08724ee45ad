"""DataStream.get_type(): the declared type each kind of step gives its records (as in PyFlink)."""
from millstream.engine.common.typeinfo import PickledBytesTypeInfo, Types
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment

T = Types.TUPLE([Types.STRING(), Types.INT()])
PICKLED = PickledBytesTypeInfo()


def test_types_through_a_pipeline():
    env = StreamExecutionEnvironment()
    src = env.from_collection([("a", 1)], T)
    assert src.get_type() == T
    assert env.from_collection([1]).get_type() == PICKLED
    assert src.map(lambda x: x).get_type() == PICKLED  # no output_type: Python objects
    assert src.map(lambda x: x[1], output_type=Types.INT()).get_type() == Types.INT()
    assert src.filter(lambda x: True).rebalance().get_type() == T  # pass-through steps keep it
    keyed = src.key_by(lambda x: x[0])
    assert keyed.get_type() == T
    assert keyed.reduce(lambda a, b: a).get_type() == T and keyed.sum(1).get_type() == T
    assert keyed.count_window(2).reduce(lambda a, b: a).get_type() == T
    assert keyed.count_window(2).reduce(lambda a, b: a, output_type=Types.INT()).get_type() == Types.INT()
    assert src.union(env.from_collection([("b", 2)], T)).get_type() == T


def test_side_output_has_its_tags_type():
    env = StreamExecutionEnvironment()
    main = env.from_collection([1], Types.INT()).map(lambda x: x, output_type=Types.INT())
    assert main.get_side_output(OutputTag("s", T)).get_type() == T
    assert main.get_side_output(OutputTag("u")).get_type() == PICKLED


def test_print_sink_records_the_type():
    env = StreamExecutionEnvironment()
    env.from_collection([("a", 1)], T).print()
    sink = next(t for t in env._transformations.values() if t.params.get("sink") == "print")
    assert sink.params["type_info"] == T
