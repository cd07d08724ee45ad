"""AsyncDataStream.unordered_wait with an asyncio AsyncFunction (order of results not relied on)."""
import asyncio

from pyflink.common import Time, Types
from pyflink.datastream import AsyncDataStream, StreamExecutionEnvironment
from pyflink.datastream.functions import AsyncFunction


class Lookup(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(0.01 * (5 - value))
        return [f"{value} -> {value * value}"]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 3, 4], type_info=Types.INT())
AsyncDataStream.unordered_wait(ds, Lookup(), Time.seconds(10), 10, Types.STRING()).print()
env.execute()
