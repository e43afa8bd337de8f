"""The table of approval requests filed by agents Sursis does not host. Mirrors migration
0030_approval_requests.

No foreign key to `pending_calls`: the request is claimed (its idempotency key taken) before its
pending call is written, which PostgreSQL holds to the commit."""

from __future__ import annotations

import sqlalchemy as sa

from sursis.infra.db.tables import UtcDateTime, metadata

approval_requests = sa.Table(
    "approval_requests",
    metadata,
    sa.Column("correlation_id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("idempotency_key", sa.String(200), nullable=True),
    sa.Column("conversation", sa.String(200), nullable=True),
    sa.Column("filed_by", sa.String(200), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Column("consumed_at", UtcDateTime, nullable=True),
    sa.Column("consumed_by", sa.String(200), nullable=True),
    sa.Column("outcome", sa.String(20), nullable=True),
    sa.Column("reported_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("workspace", "idempotency_key", name="uq_approval_requests_workspace_key"),
)
