"""``pyflink.common.types``: ``Row`` and ``RowKind`` (the change a row stands for)."""
from enum import Enum

from engine.common.row import Row

__all__ = ["Row", "RowKind"]


class RowKind(Enum):
    """Millstream's DataStream rows are always INSERT; the other kinds matter to the Table API."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def short_string(self) -> str:
        return {0: "+I", 1: "-U", 2: "+U", 3: "-D"}[self.value]

    def __str__(self) -> str:
        return self.short_string()
