"""bytes through PRIMITIVE_ARRAY(BYTE) and through PICKLED_BYTE_ARRAY (the default for untyped values)."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
raw = env.from_collection([b"abc", b"\x00\xff"], type_info=Types.PRIMITIVE_ARRAY(Types.BYTE()))
for v in raw.map(lambda b: b + b"!", output_type=Types.PRIMITIVE_ARRAY(Types.BYTE())).execute_and_collect():
    print("primitive", type(v).__name__, v)
pickled = env.from_collection([{"k": [1, 2]}, (1, "x")], type_info=Types.PICKLED_BYTE_ARRAY())
for v in pickled.map(lambda x: x).execute_and_collect():
    print("pickled", type(v).__name__, v)
