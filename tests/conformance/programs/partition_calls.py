"""shuffle, rebalance, rescale, forward and broadcast partitioning in one job: which records arrive
(not where: shuffle and rebalance pick subtasks at random in Flink), collected together."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
t = Types.TUPLE([Types.STRING(), Types.INT()])
ds = env.from_collection(list(range(6)), type_info=Types.INT())
shuffled = ds.shuffle().map(lambda x: ("shuffle", x + 1), output_type=t)
rebalanced = ds.rebalance().map(lambda x: ("rebalance", x + 2), output_type=t)
rescaled = ds.rescale().map(lambda x: ("rescale", x + 3), output_type=t)
broadcast = ds.broadcast().map(lambda x: ("broadcast", x * 10), output_type=t)
forwarded = ds.map(lambda x: x, output_type=Types.INT()).forward().map(lambda x: ("forward", -x), output_type=t)
for v in sorted(shuffled.union(rebalanced, rescaled, broadcast, forwarded).execute_and_collect()):
    print(v)
