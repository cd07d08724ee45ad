"""AsyncDataStream.ordered_wait: results keep the input order although later calls finish first;
an async function may return several results or none."""
# conformance: ordered
import asyncio

from pyflink.common import Time, Types
from pyflink.datastream import AsyncDataStream, StreamExecutionEnvironment
from pyflink.datastream.functions import AsyncFunction


class Expand(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(0.02 * (4 - value))
        return [value] * value


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([3, 0, 2, 1], type_info=Types.INT())
AsyncDataStream.ordered_wait(ds, Expand(), Time.seconds(10), 5, Types.INT()).print()
env.execute()
