"""``pyflink.datastream.async_retry_predicates``: retry predicates for AsyncDataStream (not implemented yet)."""
from engine.compat.unsupported import declare_unsupported

__all__ = ["empty_result_predicate", "exception_type_predicate", "has_exception_predicate"]

declare_unsupported(globals(), __all__, why="asynchronous I/O operators (AsyncDataStream) are not implemented yet", instead="a MapFunction or FlatMapFunction that calls the service synchronously (a thread pool inside it can overlap the calls)")
