"""``pyflink.datastream.connectors.hybrid_source``: hybrid (switching) sources (not available in Millstream).

Importable so programs that mention these names load; using any of them raises
``NotSupportedError`` naming the alternative.
"""
from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ['HybridSource', 'HybridSourceBuilder']

declare_unsupported(
    globals(),
    __all__,
    why="switching sources at runtime is not implemented",
    instead="two sources joined with union(), or a custom Source",
)
