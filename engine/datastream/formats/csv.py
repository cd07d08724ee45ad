"""``pyflink.datastream.formats.csv``: CSV formats (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['CsvBulkWriters', 'CsvReaderFormat', 'CsvRowDeserializationSchema', 'CsvRowSerializationSchema', 'CsvSchema', 'CsvSchemaBuilder']

declare_unsupported(
    globals(),
    __all__,
    why="CSV schemas are Java-side formats not implemented here",
    instead="FileSource with StreamFormat.text_line_format() and a map() using the csv module",
)
