"""The leader lease's fence in the database: the largest fencing token claimed (issue 18).

Revision ID: 0005_jobmanager_leader
Revises: 0004_ui_sessions
Create Date: 2026-11-25

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0005_jobmanager_leader"
down_revision: Union[str, Sequence[str], None] = "0004_ui_sessions"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "jobmanager_leader",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("address", sa.Text(), nullable=False),
        sa.Column("since", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobmanager_leader")),
    )


def downgrade() -> None:
    op.drop_table("jobmanager_leader")
