"""The table of reviewer verdicts: one row per call a reviewer is asked about. Mirrors migration
0026_reviewer."""

from __future__ import annotations

import sqlalchemy as sa

from sursis.infra.db.tables import UtcDateTime, metadata

pending_reviews = sa.Table(
    "pending_reviews",
    metadata,
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
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("claimed_at", UtcDateTime, nullable=True),
    sa.Column("decided_at", UtcDateTime, nullable=True),
    sa.Index("ix_pending_reviews_outcome", "outcome", "created_at"),
    sa.Index("ix_pending_reviews_workspace_claimed", "workspace", "claimed_at"),
)
