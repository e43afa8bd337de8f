"""approval_requests: requests filed by agents Sursis does not host

Each is a pending call (of a conversation and run of its own); this table holds what only an agent
outside needs: its idempotency key (unique per workspace), the digest its approval is bound to, when
and by whom the approval was consumed, and the outcome it reported.

Revision ID: 0030_approval_requests
Revises: 0028_audit_marks
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030_approval_requests"
down_revision: str | None = "0029_decision_seals"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "approval_requests",
        sa.Column("correlation_id", sa.Uuid, primary_key=True),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("conversation", sa.String(200), nullable=True),
        sa.Column("filed_by", sa.String(200), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", AT, nullable=False),
        sa.Column("expires_at", AT, nullable=False),
        sa.Column("consumed_at", AT, nullable=True),
        sa.Column("consumed_by", sa.String(200), nullable=True),
        sa.Column("outcome", sa.String(20), nullable=True),
        sa.Column("reported_at", AT, nullable=True),
        sa.UniqueConstraint("workspace", "idempotency_key", name="uq_approval_requests_workspace_key"),
    )


def downgrade() -> None:
    op.drop_table("approval_requests")
