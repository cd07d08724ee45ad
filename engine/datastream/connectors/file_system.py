"""``pyflink.datastream.connectors.file_system``: ``FileSource`` for text lines and the exactly-once ``FileSink``.

The source lives in ``file_source.py`` and the sink in ``file_sink.py``; this
module is the PyFlink-named place programs import them from.
"""
from millstream.engine.datastream.connectors.file_sink import (
    BucketAssigner,
    FileSink,
    OutputFileConfig,
    RollingPolicy,
    RowFormatBuilder,
)
from millstream.engine.datastream.connectors.file_source import FileSource, FileSourceBuilder, StreamFormat
from millstream.engine.compat.unsupported import declare_unsupported

declare_unsupported(
    globals(),
    ["BulkFormat", "FileCompactStrategy", "FileCompactor", "FileEnumeratorProvider", "FileSplitAssignerProvider"],
    why="bulk formats, file compaction and custom split enumeration are Java-side features not implemented here",
    instead="FileSource with StreamFormat.text_line_format() and FileSink.for_row_format()",
)
declare_unsupported(
    globals(),
    ["StreamingFileSink"],
    why="StreamingFileSink is the legacy SinkFunction file sink, removed in Flink 2",
    instead="FileSink.for_row_format(...) with sink_to()",
)

__all__ = [
    "BucketAssigner",
    "BulkFormat",
    "FileCompactStrategy",
    "FileCompactor",
    "FileEnumeratorProvider",
    "FileSink",
    "FileSource",
    "FileSourceBuilder",
    "OutputFileConfig",
    "RollingPolicy",
    "FileSplitAssignerProvider",
    "RowFormatBuilder",
    "StreamFormat",
    "StreamingFileSink",
]
