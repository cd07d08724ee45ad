"""One portable insert-or-update statement, using the dialect's native upsert."""
from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def upsert(
    session: Session, table: Table, values: dict[str, Any], keys: list[str], update: list[str],
    grow_only: str | None = None,
) -> None:
    """Insert ``values``; if a row with the same ``keys`` exists, overwrite only ``update``
    (with ``grow_only``, only when that column's new value is larger than the stored one).

    A native ON CONFLICT is a single atomic statement, so two threads saving the
    same new row cannot both try to INSERT it, as a select-then-insert could.
    """
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        stmt = postgresql.insert(table).values(values)
    elif dialect == "sqlite":
        stmt = sqlite.insert(table).values(values)
    else:
        raise NotImplementedError(f"no upsert for dialect {dialect!r}")
    where = table.c[grow_only] < stmt.excluded[grow_only] if grow_only is not None else None
    session.execute(
        stmt.on_conflict_do_update(index_elements=keys, set_={col: stmt.excluded[col] for col in update}, where=where)
    )
