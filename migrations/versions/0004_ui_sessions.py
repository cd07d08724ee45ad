"""Dashboard sessions: one row per login, with an expiry, deleted at logout (revocation).

Revision ID: 0004_ui_sessions
Revises: 0003_checkpoints_savepoints
Create Date: 2026-11-25

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0004_ui_sessions"
down_revision: Union[str, Sequence[str], None] = "0003_checkpoints_savepoints"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("token_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("created", sa.BigInteger(), nullable=False),
        sa.Column("expires", sa.BigInteger(), nullable=False),
        sa.Column("client", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_ui_sessions")),
    )
    op.create_index(op.f("ix_ui_sessions_expires"), "ui_sessions", ["expires"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_ui_sessions_expires"), table_name="ui_sessions")
    op.drop_table("ui_sessions")
