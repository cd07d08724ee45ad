"""``pyflink.datastream.connectors.kinesis``: Amazon Kinesis sources and sinks (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['FlinkKinesisConsumer', 'KinesisDeserializationSchema', 'KinesisFirehoseSink', 'KinesisFirehoseSinkBuilder', 'KinesisShardAssigner', 'KinesisStreamsSink', 'KinesisStreamsSinkBuilder', 'PartitionKeyGenerator', 'WatermarkTracker']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream has no AWS client",
    instead="a custom SourceFunction or SinkFunction calling boto3",
)
