"""Tables of approval routing: approver groups, votes, delegations. Mirrors migrations 0023 and
0037_sampled_reminders."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from sursis.domain.approvers import RouteState
from sursis.infra.db.tables import JSON, UtcDateTime, metadata


def _pending_call_key() -> sa.Column[Any]:
    """The key of a table of one pending call's routing: its call, deleted with it."""
    return sa.Column(
        "correlation_id",
        sa.Uuid,
        sa.ForeignKey("pending_calls.correlation_id", ondelete="CASCADE"),
        primary_key=True,
    )


approver_groups = sa.Table(
    "approver_groups",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("description", sa.String(500), nullable=True),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.UniqueConstraint("workspace", "name", name="uq_approver_groups_workspace_name"),
)

approver_group_members = sa.Table(
    "approver_group_members",
    metadata,
    sa.Column("group_id", sa.Uuid, sa.ForeignKey("approver_groups.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("key_id", sa.String(200), primary_key=True),
    sa.Column("added_by", sa.String(200), nullable=False),
    sa.Column("added_at", UtcDateTime, nullable=False),
    sa.Index("ix_approver_group_members_key_id", "key_id"),
)

pending_routes = sa.Table(
    "pending_routes",
    metadata,
    _pending_call_key(),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("approvals", sa.Integer, nullable=False, server_default="0"),
    sa.Column("escalation_level", sa.Integer, nullable=False, server_default="0"),
    sa.Column("reminded_at", UtcDateTime, nullable=True),
    sa.Column("due_at", UtcDateTime, nullable=True),
    sa.Column("reassigned_to", JSON, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("reminders_sent", sa.Integer, nullable=False, server_default="0"),
    sa.Index("ix_pending_routes_due_at", "due_at"),
)

pending_votes = sa.Table(
    "pending_votes",
    metadata,
    _pending_call_key(),
    sa.Column("voter", sa.String(200), primary_key=True),
    sa.Column("cast_by", sa.String(200), nullable=False),
    sa.Column("decision", sa.String(20), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.Column("seal", sa.String(200), nullable=True),
)

approval_delegations = sa.Table(
    "approval_delegations",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=True),
    sa.Column("delegator", sa.String(200), nullable=False),
    sa.Column("delegate", sa.String(200), nullable=False),
    sa.Column("starts_at", UtcDateTime, nullable=False),
    sa.Column("ends_at", UtcDateTime, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("revoked_at", UtcDateTime, nullable=True),
    sa.Index("ix_approval_delegations_delegate", "delegate"),
    sa.Index("ix_approval_delegations_delegator", "delegator"),
)


def route_row(state: RouteState) -> dict[str, Any]:
    return {
        "correlation_id": state.correlation_id,
        "workspace": state.workspace,
        "approvals": state.approvals,
        "escalation_level": state.escalation_level,
        "reminded_at": state.reminded_at,
        "due_at": state.due_at,
        "reassigned_to": list(state.reassigned_to) or None,
        "created_at": state.created_at,
        "reminders_sent": state.reminders_sent,
    }
