"""``pyflink.datastream.connectors.dynamic_kafka``: dynamic Kafka sources (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['DynamicKafkaSource', 'DynamicKafkaSourceBuilder', 'KafkaMetadataService', 'KafkaRecordDeserializationSchema', 'KafkaStreamSetSubscriber', 'KafkaStreamSubscriber', 'SingleClusterTopicMetadataService', 'StreamPatternSubscriber']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream has no Kafka client; its transport is Redis",
    instead="RedisStreamSource (pyflink.datastream.connectors.redis_streams) or a custom Source",
)
