"""Checkpoint and savepoint history: checkpoints (statistics per checkpoint), checkpoint_restores
and savepoints, so /jobs/{id}/checkpoints survives JobManager restarts.

Revision ID: 0003_checkpoints_savepoints
Revises: 0002_audit_log
Create Date: 2026-11-22

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0003_checkpoints_savepoints"
down_revision: Union[str, Sequence[str], None] = "0002_audit_log"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("jid", sa.String(length=32), nullable=False),
        sa.Column("checkpoint_id", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("checkpoint_type", sa.String(length=16), nullable=False),
        sa.Column("trigger_timestamp", sa.BigInteger(), nullable=False),
        sa.Column("latest_ack_timestamp", sa.BigInteger(), nullable=True),
        sa.Column("failure_timestamp", sa.BigInteger(), nullable=True),
        sa.Column("state_size", sa.BigInteger(), nullable=False),
        sa.Column("checkpointed_size", sa.BigInteger(), nullable=False),
        sa.Column("end_to_end_duration", sa.BigInteger(), nullable=False),
        sa.Column("external_path", sa.Text(), nullable=True),
        sa.Column("discarded", sa.Boolean(), nullable=False),
        sa.Column("failure_message", sa.Text(), nullable=True),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["jid"], ["jobs.jid"], name=op.f("fk_checkpoints_jid_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("jid", "checkpoint_id", name=op.f("pk_checkpoints")),
    )
    op.create_table(
        "checkpoint_restores",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("jid", sa.String(length=32), nullable=False),
        sa.Column("checkpoint_id", sa.BigInteger(), nullable=False),
        sa.Column("restore_timestamp", sa.BigInteger(), nullable=False),
        sa.Column("is_savepoint", sa.Boolean(), nullable=False),
        sa.Column("external_path", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["jid"], ["jobs.jid"], name=op.f("fk_checkpoint_restores_jid_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoint_restores")),
    )
    op.create_index(op.f("ix_checkpoint_restores_jid"), "checkpoint_restores", ["jid"], unique=False)
    op.create_table(
        "savepoints",
        sa.Column("jid", sa.String(length=32), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("checkpoint_id", sa.BigInteger(), nullable=True),
        sa.Column("checkpoint_type", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("trigger_timestamp", sa.BigInteger(), nullable=False),
        sa.Column("completion_timestamp", sa.BigInteger(), nullable=True),
        sa.Column("target_directory", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("cancel_job", sa.Boolean(), nullable=False),
        sa.Column("drain", sa.Boolean(), nullable=False),
        sa.Column("failure_cause", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["jid"], ["jobs.jid"], name=op.f("fk_savepoints_jid_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("jid", "request_id", name=op.f("pk_savepoints")),
    )
    op.create_index(op.f("ix_savepoints_trigger_timestamp"), "savepoints", ["trigger_timestamp"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_savepoints_trigger_timestamp"), table_name="savepoints")
    op.drop_table("savepoints")
    op.drop_index(op.f("ix_checkpoint_restores_jid"), table_name="checkpoint_restores")
    op.drop_table("checkpoint_restores")
    op.drop_table("checkpoints")
