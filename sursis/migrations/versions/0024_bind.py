"""tool_calls.args_hash: the hash of the arguments an approved call ran with, so an outcome replayed
after a crash is checked against what its deciders approved

Revision ID: 0024_bind
Revises: 0023_approvers
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_bind"
down_revision: str | None = "0024_policy"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("args_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("args_hash")
