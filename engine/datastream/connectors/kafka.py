"""``pyflink.datastream.connectors.kafka``: Kafka sources and sinks (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['FlinkKafkaConsumer', 'FlinkKafkaProducer', 'KafkaOffsetResetStrategy', 'KafkaOffsetsInitializer', 'KafkaRecordSerializationSchema', 'KafkaRecordSerializationSchemaBuilder', 'KafkaSink', 'KafkaSinkBuilder', 'KafkaSource', 'KafkaSourceBuilder', 'KafkaTopicPartition', 'KafkaTopicSelector', 'Semantic']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream has no Kafka client; its transport is Redis",
    instead="RedisStreamSource and RedisStreamSink (pyflink.datastream.connectors.redis_streams) or a custom Source/SinkFunction",
)
