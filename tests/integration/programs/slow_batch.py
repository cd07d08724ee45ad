"""A BATCH job (run on Spark) that takes a few seconds: each of N numbers sleeps 0.3 s in a map.
Usage: slow_batch.py N"""
import sys
import time

from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment


def slow(v):
    time.sleep(0.3)
    return v


env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(2)
env.from_collection(list(range(int(sys.argv[1])))).map(slow).print()
env.execute("slow batch")
