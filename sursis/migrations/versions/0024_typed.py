"""runs.output_json: whether a run's stored output is a JSON document (an agent's structured output)
rather than the text of its answer; runs stored before are text

Revision ID: 0024_typed
Revises: 0023_approvers
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_typed"
down_revision: str | None = "0023_approvers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("output_json", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("output_json")
