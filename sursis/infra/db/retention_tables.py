"""Tables of retention, the audit chain and the database's encryption state. Mirror migrations
0012 and 0018."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from sursis.infra.db.tables import UtcDateTime, metadata


def _chain_position() -> list[sa.Column[Any]]:
    """A workspace's place in its audit chain: the row's sequence and hash, and the anchor's."""
    return [
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("anchor_seq", sa.BigInteger, nullable=False),
        sa.Column("anchor_hash", sa.String(64), nullable=False),
    ]


audit_chain_heads = sa.Table(
    "audit_chain_heads",
    metadata,
    *_chain_position(),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("sealed_at", UtcDateTime, nullable=True),
)

retention_policies = sa.Table(
    "retention_policies",
    metadata,
    sa.Column("workspace", sa.String(100), primary_key=True),
    sa.Column("conversation_days", sa.Integer, nullable=True),
    sa.Column("audit_days", sa.Integer, nullable=True),
    sa.Column("updated_by", sa.String(200), nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

legal_holds = sa.Table(
    "legal_holds",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("conversation_id", sa.Uuid, nullable=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Index("ix_legal_holds_workspace", "workspace"),
)

purged_conversations = sa.Table(
    "purged_conversations",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("purged_at", UtcDateTime, nullable=False),
)

audit_checkpoints = sa.Table(
    "audit_checkpoints",
    metadata,
    *_chain_position(),
    sa.Column("signed_at", UtcDateTime, nullable=False),
    sa.Column("signer", sa.String(64), nullable=False),
    sa.Column("signature", sa.String(200), nullable=False),
)
"""Each workspace's latest signed checkpoint of its chain head (migration 0018)."""

encryption_keys = sa.Table(
    "encryption_keys",
    metadata,
    sa.Column("key_id", sa.String(32), primary_key=True),
    sa.Column("check_value", sa.String(64), nullable=False),
    sa.Column("first_used_at", UtcDateTime, nullable=False),
)
"""The check value of every key id the database has used; a row says it holds encrypted values."""
