"""partition_custom with a Partitioner class and a lambda; print() at parallelism 3 shows which
subtask got each record (deterministic: the partitioner decides)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import Partitioner


class ByRemainder(Partitioner):
    def partition(self, key, num_partitions):
        return key % num_partitions


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(3)
ds = env.from_collection(list(range(9)), type_info=Types.INT())
ds.partition_custom(ByRemainder(), lambda x: x).map(lambda x: x * 10, output_type=Types.INT()).print("mod")
ds.partition_custom(lambda key, n: 0 if key < 5 else n - 1, lambda x: x).print()
env.execute()
