"""``pyflink.common.types``: ``Row`` and ``RowKind`` (the change a row stands for)."""
from millstream.engine.common.row import Row, RowKind

__all__ = ["Row", "RowKind"]
