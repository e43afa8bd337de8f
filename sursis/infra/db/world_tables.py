"""The worlds context's tables, on the shared metadata (migration 0008_worlds is the source of truth).

In `db` beside the other contexts' tables, so that a purge (`retention_repository`) reaches them
without the storage package importing the worlds package, which imports it."""

from __future__ import annotations

import sqlalchemy as sa

from sursis.infra.db.tables import JSON, UtcDateTime, metadata

worlds = sa.Table(
    "worlds",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("domain", sa.String(200), nullable=False),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.UniqueConstraint("workspace", "domain", name="uq_worlds_workspace_domain"),
)
sa.Index("uq_worlds_workspace_domain_ci", worlds.c.workspace, sa.func.lower(worlds.c.domain), unique=True)

world_rules = sa.Table(
    "world_rules",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("world_id", sa.Uuid, sa.ForeignKey("worlds.id"), nullable=False),
    sa.Column("state", sa.String(30), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("predicate", sa.Text, nullable=True),
    sa.Column("applies_when", sa.Text, nullable=True),
    sa.Column("tests", JSON, nullable=False),
    sa.Column("gate", JSON, nullable=True),
    sa.Column("citations", JSON, nullable=False),
    sa.Column("evidence", JSON, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("request_conversation_id", sa.Uuid, nullable=True),
    sa.Column("request_tool_call_id", sa.String(200), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("enshrined_at", UtcDateTime, nullable=True),
    sa.Index("ix_world_rules_world_state", "world_id", "state"),
)

world_decisions = sa.Table(
    "world_decisions",
    metadata,
    sa.Column("world_id", sa.Uuid, sa.ForeignKey("worlds.id"), primary_key=True),
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("rule_ids", JSON, nullable=False),
    sa.Column("context", JSON, nullable=False),
    sa.Column("outcome", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
)

world_flags = sa.Table(
    "world_flags",
    metadata,
    sa.Column("world_id", sa.Uuid, sa.ForeignKey("worlds.id"), primary_key=True),
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("decision_id", sa.String(200), nullable=False),
    sa.Column("kind", sa.String(30), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.ForeignKeyConstraint(["world_id", "decision_id"], ["world_decisions.world_id", "world_decisions.id"]),
)

world_sessions = sa.Table(
    "world_sessions",
    metadata,
    sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), primary_key=True),
    sa.Column("world_id", sa.Uuid, sa.ForeignKey("worlds.id"), nullable=False, index=True),
    sa.Column("mode", sa.String(20), nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
)

memories = sa.Table(
    "memories",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("world_id", sa.Uuid, sa.ForeignKey("worlds.id"), nullable=True),
    sa.Column("agent", sa.String(100), nullable=False),
    sa.Column("tier", sa.String(20), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("conversation_id", sa.Uuid, nullable=True),
    sa.Column("run_id", sa.Uuid, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Index("ix_memories_scope", "workspace", "agent", "world_id", "tier"),
)
