"""``pyflink.datastream.async_data_stream``: ``AsyncDataStream`` (not implemented yet).

Importable so programs load; ``ordered_wait``/``unordered_wait`` raise ``NotSupportedError``
naming the alternative until asynchronous I/O operators exist.
"""
from engine.compat.unsupported import declare_unsupported

__all__ = ["AsyncDataStream"]

declare_unsupported(globals(), __all__, why="asynchronous I/O operators (AsyncDataStream) are not implemented yet", instead="a MapFunction or FlatMapFunction that calls the service synchronously (a thread pool inside it can overlap the calls)")
