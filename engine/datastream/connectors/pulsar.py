"""``pyflink.datastream.connectors.pulsar``: Pulsar sources and sinks (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['MessageDelayer', 'PulsarSink', 'PulsarSinkBuilder', 'PulsarSource', 'PulsarSourceBuilder', 'RangeGenerator', 'StartCursor', 'StopCursor', 'TopicRoutingMode']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream has no Pulsar client",
    instead="RedisStreamSource and RedisStreamSink (pyflink.datastream.connectors.redis_streams) or a custom Source/SinkFunction",
)
