"""A user function that raises at run time on one record."""
from pyflink.datastream import StreamExecutionEnvironment


def explode(x):
    if x == 777:
        raise ValueError("record 777 is cursed")
    return x


env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection(list(range(2000))).rebalance().map(explode).print()
env.execute("failing job")
