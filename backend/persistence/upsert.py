"""One portable insert-or-update statement, using the dialect's native upsert."""
from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def upsert(session: Session, table: Table, values: dict[str, Any], keys: list[str], update: list[str]) -> None:
    """Insert ``values``; if a row with the same ``keys`` exists, overwrite only ``update``.

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
    session.execute(
        stmt.on_conflict_do_update(index_elements=keys, set_={col: stmt.excluded[col] for col in update})
    )
