"""Tables of the customer context: the workspace rows its specialists read, the platform events
that bring them, and the specialists' delegations. Mirrors migration 0009."""

from __future__ import annotations

import sqlalchemy as sa

from sursis.infra.db.tables import JSON, UtcDateTime, metadata

platform_events = sa.Table(
    "platform_events",
    metadata,
    sa.Column("workspace", sa.String(100), primary_key=True),
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("type", sa.String(60), nullable=False),
    sa.Column("data", JSON, nullable=False),
    sa.Column("occurred_at", UtcDateTime, nullable=True),
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.Column("received_by", sa.String(200), nullable=False),
    sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), nullable=True),
)

scans = sa.Table(
    "scans",
    metadata,
    sa.Column("workspace", sa.String(100), primary_key=True),
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("status", sa.String(30), nullable=False),
    sa.Column("verdict", sa.String(30), nullable=True),
    sa.Column("scores", JSON, nullable=False),
    sa.Column("changeset", JSON, nullable=False),
    sa.Column("failures", JSON, nullable=False),
    sa.Column("completed_at", UtcDateTime, nullable=True),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("rerun_count", sa.Integer, nullable=False, server_default="0"),
)

framework_configs = sa.Table(
    "framework_configs",
    metadata,
    sa.Column("workspace", sa.String(100), primary_key=True),
    sa.Column("config", JSON, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

rubrics = sa.Table(
    "rubrics",
    metadata,
    sa.Column("workspace", sa.String(100), primary_key=True),
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("threshold", sa.Float, nullable=False),
    sa.Column("weight", sa.Float, nullable=False),
)

onboarding = sa.Table(
    "onboarding",
    metadata,
    sa.Column("workspace", sa.String(100), primary_key=True),
    sa.Column("steps_done", JSON, nullable=False),
    sa.Column("steps_todo", JSON, nullable=False),
    sa.Column("trace_ingestion", sa.String(30), nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

workspace_errors = sa.Table(
    "workspace_errors",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("source", sa.String(60), nullable=False),
    sa.Column("scan_id", sa.String(200), nullable=True),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("occurred_at", UtcDateTime, nullable=False),
)

delegations = sa.Table(
    "delegations",
    metadata,
    sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), primary_key=True),
    sa.Column("tool_call_id", sa.String(200), primary_key=True),
    sa.Column("run_id", sa.Uuid, nullable=False),
    sa.Column("specialist", sa.String(100), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("messages", sa.Text, nullable=False),
    sa.Column("deferred", JSON, nullable=True),
    sa.Column("output", sa.Text, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)
