"""``pyflink.datastream.connectors.jdbc``: JDBC sinks (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['JdbcConnectionOptions', 'JdbcExecutionOptions', 'JdbcSink']

declare_unsupported(
    globals(),
    __all__,
    why="JDBC is a Java API",
    instead="a custom SinkFunction (add_sink) using a Python DB-API driver",
)
