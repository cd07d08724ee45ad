"""``pyflink.datastream.formats.avro``: Avro formats (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['AvroBulkWriters', 'AvroInputFormat', 'AvroRowDeserializationSchema', 'AvroRowSerializationSchema', 'AvroSchema', 'GenericRecordAvroTypeInfo']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream has no Avro codec",
    instead="a map() that decodes with the fastavro package, over FileSource or RedisStreamSource",
)
