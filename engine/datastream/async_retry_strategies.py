"""``pyflink.datastream.async_retry_strategies``: retry strategies for AsyncDataStream (not implemented yet)."""
from engine.compat.unsupported import declare_unsupported

__all__ = ["ExponentialBackoffDelayRetryStrategy", "FixedDelayRetryStrategy", "NoRetryStrategy", "RetryPredicate"]

declare_unsupported(globals(), __all__, why="asynchronous I/O operators (AsyncDataStream) are not implemented yet", instead="a MapFunction or FlatMapFunction that calls the service synchronously (a thread pool inside it can overlap the calls)")
