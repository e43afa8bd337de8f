"""categories: the tool's category on pending calls and tool-call records; a world's domain is
unique per workspace whatever its case

Revision ID: 0011_categories
Revises: 0010_channels
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_categories"
down_revision: str | None = "0010_channels"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Null on rows written before the category was recorded: unknown, not guessed.
    op.add_column("pending_calls", sa.Column("category", sa.String(20), nullable=True))
    op.add_column("tool_calls", sa.Column("category", sa.String(20), nullable=True))
    op.create_index(
        "uq_worlds_workspace_domain_ci",
        "worlds",
        ["workspace", sa.text("lower(domain)")],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("uq_worlds_workspace_domain_ci", table_name="worlds")
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("category")
    with op.batch_alter_table("pending_calls") as batch:
        batch.drop_column("category")
