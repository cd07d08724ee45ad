"""An ended job's print() output, kept with the job (bounded): Redis holds it only for an hour.

Revision ID: 0007_job_output
Revises: 0006_job_spark_progress
Create Date: 2026-11-25

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0007_job_output"
down_revision: Union[str, Sequence[str], None] = "0006_job_spark_progress"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "job_output",
        sa.Column("jid", sa.String(length=32), nullable=False),
        sa.Column("lines", sa.JSON(), nullable=False),
        sa.Column("first_line", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("kept_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["jid"], ["jobs.jid"], name=op.f("fk_job_output_jid_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("jid", name=op.f("pk_job_output")),
    )


def downgrade() -> None:
    op.drop_table("job_output")
