"""Runs COUNT small jobs one after another on the cluster, each a keyed sum at parallelism P.

Usage: many_jobs.py COUNT P
"""
import sys

from pyflink.datastream import StreamExecutionEnvironment

COUNT, P = int(sys.argv[1]), int(sys.argv[2])

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(P)
for i in range(COUNT):
    (env.from_collection(list(range(200))).rebalance().map(lambda x: (x % 4, x))
     .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).filter(lambda t: False).print())
    env.execute(f"job {i}")
    print(f"done {i}", flush=True)
