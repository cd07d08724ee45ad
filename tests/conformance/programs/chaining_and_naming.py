"""Operator naming and chaining calls (name, uid, set_description, start_new_chain, disable_chaining,
set_parallelism, set_max_parallelism, set_buffer_timeout): output unchanged."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 3, 4], type_info=Types.INT()).name("numbers").uid("numbers-src")
a = ds.map(lambda x: x + 1, output_type=Types.INT()).name("inc").uid("inc").set_description("adds one")
b = a.filter(lambda x: x > 2).start_new_chain().name("big")
c = b.map(lambda x: x * 2, output_type=Types.INT()).disable_chaining()
d = c.map(lambda x: x - 1, output_type=Types.INT()).set_parallelism(1).set_max_parallelism(8).set_buffer_timeout(1)
d.print().name("out")
env.execute("chaining")
