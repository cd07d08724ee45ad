"""The highest index read of each writer of a job's collect results and print stream: the record of
what was read, which no one with only the Redis URL can reset (a Redis restart or a deleted key did).

Revision ID: 0008_stream_marks
Revises: 0007_job_output
Create Date: 2026-11-28

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0008_stream_marks"
down_revision: Union[str, Sequence[str], None] = "0007_job_output"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "collect_marks",
        sa.Column("jid", sa.String(length=32), nullable=False),
        sa.Column("writer", sa.String(length=16), nullable=False),
        sa.Column("high", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["jid"], ["jobs.jid"], name=op.f("fk_collect_marks_jid_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("jid", "writer", name=op.f("pk_collect_marks")),
    )
    op.create_table(
        "stdout_marks",
        sa.Column("jid", sa.String(length=32), nullable=False),
        sa.Column("writer", sa.String(length=16), nullable=False),
        sa.Column("high", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("floor", sa.BigInteger(), nullable=False),
        sa.Column("upto", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["jid"], ["jobs.jid"], name=op.f("fk_stdout_marks_jid_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("jid", "writer", name=op.f("pk_stdout_marks")),
    )


def downgrade() -> None:
    op.drop_table("stdout_marks")
    op.drop_table("collect_marks")
