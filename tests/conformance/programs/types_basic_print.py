"""The basic types printed by the print() sink (Java's toString of each value)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_collection([True, False], type_info=Types.BOOLEAN()).print("bool")
env.from_collection([3, -4], type_info=Types.INT()).print("int")
env.from_collection([2 ** 40], type_info=Types.LONG()).print("long")
env.from_collection([1.5, 2.0, 1e-7], type_info=Types.DOUBLE()).print("double")
env.from_collection([0.5], type_info=Types.FLOAT()).print("float")
env.from_collection(["s", ""], type_info=Types.STRING()).print("string")
env.execute()
