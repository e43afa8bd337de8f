"""runs: who started a run (`started_by`, `started_role`), for an adopted agent's deps factory

Revision ID: 0019_agents
Revises: 0018_protection
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_agents"
down_revision: str | None = "0018_protection"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("started_by", sa.String(200), nullable=True))
        batch.add_column(sa.Column("started_role", sa.String(20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("started_role")
        batch.drop_column("started_by")
