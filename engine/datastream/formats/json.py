"""``pyflink.datastream.formats.json``: JSON row formats (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['JsonRowDeserializationSchema', 'JsonRowSerializationSchema']

declare_unsupported(
    globals(),
    __all__,
    why="JSON row schemas are Java-side formats not implemented here",
    instead="SimpleStringSchema (or text lines) and a map() using json.loads / json.dumps",
)
