"""An AsyncFunction with open() (its runtime context), exponential-backoff retries on any exception,
several results or none per record, at parallelism 2 between a map and a keyed map."""
import asyncio

from pyflink.common import Time, Types
from pyflink.datastream import (AsyncDataStream, AsyncRetryStrategy, RuntimeExecutionMode,
                                StreamExecutionEnvironment, async_retry_predicates)
from pyflink.datastream.functions import AsyncFunction, RuntimeContext


class Split(AsyncFunction):
    def open(self, runtime_context: RuntimeContext):
        self.parallelism = runtime_context.get_number_of_parallel_subtasks()
        self.failed = set()

    async def async_invoke(self, value):
        await asyncio.sleep(0.001 * (value % 5))
        if value % 4 == 0 and value not in self.failed:
            self.failed.add(value)
            raise ValueError("first call of %d fails" % value)
        return [("w%d" % (value % 3), value, self.parallelism)] * (value % 3)  # 0, 1 or 2 results

    def close(self):
        pass


strategy = AsyncRetryStrategy.exponential_backoff(
    3, 10, 100, 2.0, None, async_retry_predicates.has_exception_predicate)
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
ds = env.from_collection(list(range(30)), type_info=Types.INT()).map(lambda v: v + 1, Types.INT())
split = AsyncDataStream.unordered_wait_with_retry(
    ds, Split(), Time.seconds(10), strategy, 3, Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()]))
split.key_by(lambda t: t[0]).map(lambda t: "%s %d (parallelism %d)" % t, Types.STRING()).print()
env.execute()
