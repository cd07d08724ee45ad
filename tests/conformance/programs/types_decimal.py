"""BIG_DEC values (decimal.Decimal) and BIG_INT values beyond 64 bits (PyFlink rejects small ints for
BIG_INT): arithmetic in a map, printed and collected."""
from decimal import Decimal

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
prices = env.from_collection([Decimal("1.10"), Decimal("20.005"), Decimal("-3")], type_info=Types.BIG_DEC())
doubled = prices.map(lambda d: d * 2, output_type=Types.BIG_DEC())
doubled.print("dec")
env.from_collection([2 ** 70, -(2 ** 65)], type_info=Types.BIG_INT()).print("bigint")
env.execute()
print("collected", [(type(v).__name__, str(v)) for v in doubled.execute_and_collect()])
