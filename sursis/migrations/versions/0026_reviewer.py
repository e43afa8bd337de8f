"""pending_reviews: a reviewer model's verdict on an asked call (model, question, policy version,
verdict, reason, what it did), also what the workspace's reviewer budget counts

Revision ID: 0026_reviewer
Revises: 0025_fork
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026_reviewer"
down_revision: str | None = "0025_fork"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pending_reviews",
        sa.Column(
            "correlation_id",
            sa.Uuid,
            sa.ForeignKey("pending_calls.correlation_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("policy_version", sa.Integer, nullable=True),
        sa.Column("rule", sa.String(100), nullable=True),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("effect", sa.String(20), nullable=True),
        sa.Column("tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", AT, nullable=False),
        sa.Column("claimed_at", AT, nullable=True),
        sa.Column("decided_at", AT, nullable=True),
    )
    op.create_index("ix_pending_reviews_outcome", "pending_reviews", ["outcome", "created_at"])
    op.create_index("ix_pending_reviews_workspace_claimed", "pending_reviews", ["workspace", "claimed_at"])


def downgrade() -> None:
    op.drop_table("pending_reviews")
