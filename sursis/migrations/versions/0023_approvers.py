"""approver groups, their members, votes on pending calls, approval delegations and the routing
state of a pending call that asks groups (approvals counted, escalation level, next reminder or
escalation, reassignment)

Revision ID: 0023_approvers
Revises: 0022_policies
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0023_approvers"
down_revision: str | None = "0022_policies"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
AT = sa.DateTime(timezone=True)
PENDING_BEFORE = sa.text("type IN ('pending.created', 'pending.resolved')")
PENDING_AFTER = sa.text(
    "type IN ('pending.created', 'pending.resolved', 'pending.vote', 'pending.reminded', "
    "'pending.escalated', 'conversation.started')"
)


def _pending_event_indexes(where: sa.TextClause) -> None:
    """The workspace stream's partial indexes, for the event types it reads (`PENDING_EVENT_TYPES`)."""
    op.drop_index("ix_events_pending_workspace_id", table_name="events")
    op.drop_index("ix_events_pending_id", table_name="events")
    op.create_index("ix_events_pending_id", "events", ["id"], postgresql_where=where, sqlite_where=where)
    op.create_index(
        "ix_events_pending_workspace_id",
        "events",
        ["workspace", "id"],
        postgresql_where=where,
        sqlite_where=where,
    )


def upgrade() -> None:
    op.create_table(
        "approver_groups",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("description", sa.String(500), nullable=True),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", AT, nullable=False),
        sa.UniqueConstraint("workspace", "name", name="uq_approver_groups_workspace_name"),
    )
    op.create_table(
        "approver_group_members",
        sa.Column(
            "group_id", sa.Uuid, sa.ForeignKey("approver_groups.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("key_id", sa.String(200), primary_key=True),
        sa.Column("added_by", sa.String(200), nullable=False),
        sa.Column("added_at", AT, nullable=False),
    )
    op.create_index("ix_approver_group_members_key_id", "approver_group_members", ["key_id"])
    op.create_table(
        "pending_routes",
        sa.Column(
            "correlation_id",
            sa.Uuid,
            sa.ForeignKey("pending_calls.correlation_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("approvals", sa.Integer, nullable=False, server_default="0"),
        sa.Column("escalation_level", sa.Integer, nullable=False, server_default="0"),
        sa.Column("reminded_at", AT, nullable=True),
        sa.Column("due_at", AT, nullable=True),
        sa.Column("reassigned_to", JSONB, nullable=True),
        sa.Column("created_at", AT, nullable=False),
    )
    op.create_index("ix_pending_routes_due_at", "pending_routes", ["due_at"])
    op.create_table(
        "pending_votes",
        sa.Column(
            "correlation_id",
            sa.Uuid,
            sa.ForeignKey("pending_calls.correlation_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("voter", sa.String(200), primary_key=True),
        sa.Column("cast_by", sa.String(200), nullable=False),
        sa.Column("decision", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("at", AT, nullable=False),
    )
    op.create_table(
        "approval_delegations",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("workspace", sa.String(100), nullable=True),
        sa.Column("delegator", sa.String(200), nullable=False),
        sa.Column("delegate", sa.String(200), nullable=False),
        sa.Column("starts_at", AT, nullable=False),
        sa.Column("ends_at", AT, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", AT, nullable=False),
        sa.Column("revoked_at", AT, nullable=True),
    )
    op.create_index("ix_approval_delegations_delegate", "approval_delegations", ["delegate"])
    op.create_index("ix_approval_delegations_delegator", "approval_delegations", ["delegator"])
    _pending_event_indexes(PENDING_AFTER)


def downgrade() -> None:
    _pending_event_indexes(PENDING_BEFORE)
    op.drop_table("approval_delegations")
    op.drop_table("pending_votes")
    op.drop_table("pending_routes")
    op.drop_table("approver_group_members")
    op.drop_table("approver_groups")
