"""Tables of people's sign-in: provisioning rules, sign-ins in progress and sessions. Mirror
migration 0036."""

from __future__ import annotations

import sqlalchemy as sa

from sursis.infra.db.tables import JSON, UtcDateTime, metadata

oidc_provisioning_rules = sa.Table(
    "oidc_provisioning_rules",
    metadata,
    sa.Column("provider_group", sa.String(200), primary_key=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("workspace", sa.String(100), nullable=True),
    sa.Column("updated_by", sa.String(300), nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

person_sign_ins = sa.Table(
    "person_sign_ins",
    metadata,
    sa.Column("state_hash", sa.String(64), primary_key=True),
    sa.Column("nonce", sa.String(100), nullable=False),
    sa.Column("verifier", sa.String(100), nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Index("ix_person_sign_ins_expires_at", "expires_at"),
)

person_sessions = sa.Table(
    "person_sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("person", sa.String(300), nullable=False),
    sa.Column("name", sa.String(300), nullable=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("workspace", sa.String(100), nullable=True),
    sa.Column("groups", JSON, nullable=False),
    sa.Column("refresh_token", sa.Text, nullable=True),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("refreshed_at", sa.Float, nullable=False),
    sa.Index("ix_person_sessions_expires_at", "expires_at"),
)
