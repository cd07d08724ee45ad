"""A program that raises while building its graph."""
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
stream = env.from_collection([1, 2, 3])
raise RuntimeError("the configuration file settings.ini is missing")
