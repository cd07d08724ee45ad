"""Initial schema: jobs, job_exceptions, jars and taskmanagers.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("jid", sa.String(length=32), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("job_type", sa.String(length=16), nullable=False),
        sa.Column("start_time", sa.BigInteger(), nullable=False),
        sa.Column("end_time", sa.BigInteger(), nullable=False),
        sa.Column("last_modification", sa.BigInteger(), nullable=False),
        sa.Column("job_graph", sa.JSON(), nullable=False),
        sa.Column("timestamps", sa.JSON(), nullable=False),
        sa.Column("vertices", sa.JSON(), nullable=False),
        sa.Column("failure_cause", sa.Text(), nullable=True),
        sa.Column("user_code", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("jid", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_start_time"), "jobs", ["start_time"], unique=False)

    op.create_table(
        "job_exceptions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("jid", sa.String(length=32), nullable=False),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("exception_name", sa.Text(), nullable=False),
        sa.Column("stacktrace", sa.Text(), nullable=False),
        sa.Column("task_name", sa.Text(), nullable=True),
        sa.Column("vertex_id", sa.String(length=64), nullable=True),
        sa.Column("subtask", sa.Integer(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("endpoint", sa.String(length=255), nullable=True),
        sa.Column("taskmanager_id", sa.String(length=255), nullable=True),
        sa.ForeignKeyConstraint(
            ["jid"], ["jobs.jid"], name=op.f("fk_job_exceptions_jid_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_exceptions")),
    )
    op.create_index(op.f("ix_job_exceptions_jid"), "job_exceptions", ["jid"], unique=False)

    op.create_table(
        "jars",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("original_name", sa.Text(), nullable=False),
        sa.Column("stored_path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("uploaded", sa.BigInteger(), nullable=False),
        sa.Column("entry", sa.JSON(none_as_null=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jars")),
    )

    op.create_table(
        "taskmanagers",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("data_port", sa.Integer(), nullable=True),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("first_seen", sa.BigInteger(), nullable=False),
        sa.Column("last_seen", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_taskmanagers")),
    )


def downgrade() -> None:
    op.drop_table("taskmanagers")
    op.drop_table("jars")
    op.drop_index(op.f("ix_job_exceptions_jid"), table_name="job_exceptions")
    op.drop_table("job_exceptions")
    op.drop_index(op.f("ix_jobs_start_time"), table_name="jobs")
    op.drop_table("jobs")
