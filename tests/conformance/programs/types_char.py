"""Types.CHAR for one-character strings (PyFlink itself rejects str values for it)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_collection(["a", "z"], type_info=Types.CHAR()).print()
env.execute()
