"""``pyflink.datastream.connectors.rabbitmq``: RabbitMQ sources and sinks (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['RMQConnectionConfig', 'RMQSink', 'RMQSource']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream has no RabbitMQ client",
    instead="RedisStreamSource and RedisStreamSink (pyflink.datastream.connectors.redis_streams) or a custom SourceFunction/SinkFunction",
)
