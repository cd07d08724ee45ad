"""Spark's final progress of a BATCH job on Spark, kept with the job.

Revision ID: 0006_job_spark_progress
Revises: 0005_jobmanager_leader
Create Date: 2026-11-25

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0006_job_spark_progress"
down_revision: Union[str, Sequence[str], None] = "0005_jobmanager_leader"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("spark", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("spark")
