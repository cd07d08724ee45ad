"""``pyflink.datastream.connectors.elasticsearch``: Elasticsearch sinks (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['Elasticsearch6SinkBuilder', 'Elasticsearch7SinkBuilder', 'ElasticsearchEmitter', 'ElasticsearchSink', 'FlushBackoffType']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream has no Elasticsearch client",
    instead="a custom SinkFunction (add_sink) calling the elasticsearch package",
)
