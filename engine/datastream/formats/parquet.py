"""``pyflink.datastream.formats.parquet``: Parquet readers and writers (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['AvroParquetReaders', 'AvroParquetWriters', 'ParquetBulkWriters', 'ParquetColumnarRowInputFormat']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream's file connectors read and write row formats only",
    instead="FileSource/FileSink with row formats, or a bounded job reading Parquet with pyarrow in a custom Source",
)
