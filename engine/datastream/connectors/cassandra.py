"""``pyflink.datastream.connectors.cassandra``: Cassandra sinks (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['CassandraCommitter', 'CassandraFailureHandler', 'CassandraSink', 'ClusterBuilder', 'ConsistencyLevel', 'MapperOptions']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream has no Cassandra client",
    instead="a custom SinkFunction (add_sink) calling the cassandra-driver package",
)
