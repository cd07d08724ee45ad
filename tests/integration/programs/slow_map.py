"""A slow operator: 2 ms a record in a map after a key_by, for the rate metrics test."""
import sys
import time

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment


def slow(x):
    time.sleep(0.002)
    return x


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
numbers = env.from_collection(list(range(int(sys.argv[1]))), type_info=Types.INT())
numbers.key_by(lambda x: x % 7).map(slow, output_type=Types.INT()).name("slow").print()
env.execute("slow map")
