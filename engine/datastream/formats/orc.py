"""``pyflink.datastream.formats.orc``: ORC bulk writers (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['OrcBulkWriters']

declare_unsupported(
    globals(),
    __all__,
    why="Millstream's FileSink writes row formats only",
    instead="FileSink.for_row_format(...)",
)
