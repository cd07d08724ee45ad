"""AsyncDataStream.ordered_wait_with_retry: a fixed-delay strategy retries on a ConnectionError and on
an empty result; a call that never answers in time gets the function's timeout() fallback; the
results keep the input order."""
# conformance: ordered
import asyncio
import functools

from pyflink.common import Time, Types
from pyflink.datastream import AsyncDataStream, AsyncRetryStrategy, StreamExecutionEnvironment, async_retry_predicates
from pyflink.datastream.functions import AsyncFunction


class Lookup(AsyncFunction):
    def __init__(self):
        self.attempts = {}

    async def async_invoke(self, value):
        n = self.attempts[value] = self.attempts.get(value, 0) + 1
        if value == 7:
            await asyncio.sleep(30)  # far past the timeout: timeout() answers for it
        if value % 3 == 0 and n < 3:
            raise ConnectionError("busy")  # retried
        if value % 3 == 1 and n < 2:
            return []  # empty: retried by the result predicate
        return ["%d after %d attempt(s)" % (value, n)]

    def timeout(self, value):
        return ["%d timed out" % value]


def retry_on(result):
    return async_retry_predicates.empty_result_predicate(result)


strategy = AsyncRetryStrategy.fixed_delay(
    max_attempts=5,
    backoff_time_millis=50,
    result_predicate=retry_on,
    exception_predicate=functools.partial(async_retry_predicates.exception_type_predicate,
                                          expected_error_type=ConnectionError))
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(list(range(10)), type_info=Types.INT())
AsyncDataStream.ordered_wait_with_retry(ds, Lookup(), Time.seconds(3), strategy, 4, Types.STRING()).print()
env.execute()
