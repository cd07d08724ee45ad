"""``pyflink.datastream.connectors.file_system``: ``FileSource`` for text lines and the exactly-once ``FileSink``.

The source lives in ``file_source.py`` and the sink in ``file_sink.py``; this
module is the PyFlink-named place programs import them from.
"""
from engine.datastream.connectors.file_sink import (
    BucketAssigner,
    FileSink,
    OutputFileConfig,
    RollingPolicy,
    RowFormatBuilder,
)
from engine.datastream.connectors.file_source import FileSource, FileSourceBuilder, StreamFormat

__all__ = [
    "BucketAssigner",
    "FileSink",
    "FileSource",
    "FileSourceBuilder",
    "OutputFileConfig",
    "RollingPolicy",
    "RowFormatBuilder",
    "StreamFormat",
]
