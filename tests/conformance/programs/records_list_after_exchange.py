"""Untyped list records keep their type through a keyed exchange and a rebalance: a record [1, 2]
is still a list downstream (PyFlink pickles untyped records), and tuples inside stay tuples."""
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection([[1, 2], [3, 4, (5, 6)], [1, ["x", ("y",)]], [7]])
ds.key_by(lambda v: v[0]).map(lambda v: f"keyed {type(v).__name__} {v!r}").print()
ds.rebalance().map(lambda v: f"rebalanced {type(v).__name__} {v!r}").set_parallelism(1).print().set_parallelism(1)
env.execute()
