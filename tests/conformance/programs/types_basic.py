"""The basic types as fields of one ROW, collected: each value's repr and Python type after the trip."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
names = ["STRING", "BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE"]
row_type = Types.ROW([Types.STRING(), Types.BOOLEAN(), Types.BYTE(), Types.SHORT(), Types.INT(), Types.LONG(),
                      Types.FLOAT(), Types.DOUBLE()])
data = [("hi", True, 1, 300, 7, 2 ** 40, 1.5, 3.141592653589793),
        ("", False, -128, -2, -2147483648, -1, -0.25, 1e-300)]
for row in env.from_collection(data, type_info=row_type).execute_and_collect():
    for name, v in zip(names, row):
        print(name, repr(v), type(v).__name__)
