"""shuffle, rebalance, rescale, forward, broadcast and global partitioning: which records arrive
(not where, which is random in Flink for shuffle/rebalance), collected per call."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection(list(range(6)), type_info=Types.INT())
print("shuffle", sorted(ds.shuffle().map(lambda x: x + 1, output_type=Types.INT()).execute_and_collect()))
print("rebalance", sorted(ds.rebalance().map(lambda x: x + 2, output_type=Types.INT()).execute_and_collect()))
print("rescale", sorted(ds.rescale().map(lambda x: x + 3, output_type=Types.INT()).execute_and_collect()))
print("broadcast", sorted(ds.broadcast().map(lambda x: x * 10, output_type=Types.INT()).execute_and_collect()))
mapped = ds.map(lambda x: x, output_type=Types.INT())
print("forward", sorted(mapped.forward().map(lambda x: -x, output_type=Types.INT()).execute_and_collect()))
