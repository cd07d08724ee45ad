"""What a KeyedStream refuses: repartitioning and forcing non-parallelism, with PyFlink's messages."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
keyed = env.from_collection([1, 2, 3], type_info=Types.INT()).key_by(lambda x: x % 2, key_type=Types.INT())
for name in ["shuffle", "rebalance", "rescale", "forward", "broadcast", "force_non_parallel"]:
    try:
        getattr(keyed, name)()
        print(name, "accepted")
    except Exception as e:  # PyFlink raises a bare Exception here
        print(name, type(e).__name__, str(e))
keyed.map(lambda x: x * 10, output_type=Types.INT()).print()
env.execute("keyed_stream_errors")
