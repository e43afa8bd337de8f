"""SQLAlchemy Core tables. The Alembic migrations are the source of truth for the schema;
these definitions mirror them for queries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both SQLite (which stores naive text) and PostgreSQL."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = sa.MetaData()
# The predicates of the partial indexes. A statement can use such an index only if its own
# condition names the same literal (a bound parameter cannot prove the predicate in a generic plan).
LIVE_RUNS = sa.text("status IN ('queued', 'running', 'suspended')")
AWAITING = sa.text("status = 'awaiting'")
UNDELIVERED = sa.text("status = 'pending'")


def status_literal(value: str) -> Any:
    """A status written into the statement as a literal, for a condition a partial index must match."""
    return sa.literal_column(f"'{value}'", sa.String())


# Python None is SQL NULL, whether it comes in a statement's values or in its parameters.
JSON: Any = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")

conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False, index=True),
    sa.Column("agent", sa.String(100), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("active_run_id", sa.Uuid, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=True),
    # A fork's origin (migration 0025_fork); no foreign key: either side may be purged alone.
    sa.Column("forked_from_id", sa.Uuid, nullable=True, index=True),
    sa.Column("forked_from_seq", sa.Integer, nullable=True),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("run_id", sa.Uuid, nullable=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("channel", sa.String(20), nullable=True),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), nullable=False, index=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("agent", sa.String(100), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("input", sa.Text, nullable=False),
    sa.Column("output", sa.Text, nullable=True),
    sa.Column("output_json", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("stream", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("error", JSON, nullable=True),
    sa.Column("segment", sa.Integer, nullable=False),
    sa.Column("awaiting_count", sa.Integer, nullable=False),
    sa.Column("usage", JSON, nullable=False),
    sa.Column("cancel_requested", sa.Boolean, nullable=False),
    sa.Column("claims", sa.Integer, nullable=False, server_default="0"),
    sa.Column("lease_owner", sa.String(200), nullable=True),
    sa.Column("lease_expires_at", UtcDateTime, nullable=True),
    sa.Column("trace_context", JSON, nullable=True),
    # An adopted agent's deps state (`StateDeps`), kept while the run waits (sealed; 0032_deps_state).
    sa.Column("deps_state", JSON, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.Column("channel", sa.String(20), nullable=False, server_default="web"),
    sa.Column("started_by", sa.String(200), nullable=True),
    sa.Column("started_role", sa.String(20), nullable=True),
    # The queue: a partial index over the live states only (migration 0013_volume).
    sa.Index(
        "ix_runs_live_status_updated_at",
        "status",
        "updated_at",
        postgresql_where=LIVE_RUNS,
        sqlite_where=LIVE_RUNS,
    ),
)

pending_calls = sa.Table(
    "pending_calls",
    metadata,
    sa.Column("correlation_id", sa.Uuid, primary_key=True),
    sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), nullable=False),
    sa.Column("run_id", sa.Uuid, sa.ForeignKey("runs.id"), nullable=False, index=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("segment", sa.Integer, nullable=False),
    sa.Column("tool_call_id", sa.String(200), nullable=False),
    sa.Column("tool_name", sa.String(200), nullable=False),
    sa.Column("agent", sa.String(100), nullable=False),
    sa.Column("executor", sa.String(20), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("args", JSON, nullable=False),
    sa.Column("args_summary", JSON, nullable=False),
    sa.Column("args_hash", sa.String(64), nullable=False),
    sa.Column("effect_description", sa.Text, nullable=False),
    sa.Column("status", sa.String(30), nullable=False),
    sa.Column("resolution", JSON, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("resolved_by", sa.String(200), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Column("resolved_at", UtcDateTime, nullable=True),
    sa.Column("agent_path", sa.String(200), nullable=True),
    sa.Column("category", sa.String(20), nullable=True),
    sa.Column("policy", JSON, nullable=True),
    sa.Column("requested_by", sa.String(200), nullable=True),
    sa.Column("validated_args", JSON, nullable=True),
    sa.Column("ask_seal", sa.String(200), nullable=True),
    sa.UniqueConstraint(
        "conversation_id", "tool_call_id", "kind", name="uq_pending_calls_conversation_tool_call"
    ),
    sa.Index("ix_pending_calls_status_created_at", "status", "created_at"),
    sa.Index(
        "ix_pending_calls_awaiting_expires_at", "expires_at", postgresql_where=AWAITING, sqlite_where=AWAITING
    ),
    sa.Index(
        "ix_pending_calls_workspace_status_created_at", "workspace", "status", "created_at", "correlation_id"
    ),
)

tool_calls = sa.Table(
    "tool_calls",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("conversation_id", sa.Uuid, nullable=False),
    sa.Column("run_id", sa.Uuid, nullable=False, index=True),
    sa.Column("tool_call_id", sa.String(200), nullable=False),
    sa.Column("tool_name", sa.String(200), nullable=False),
    sa.Column("agent_name", sa.String(100), nullable=False),
    sa.Column("ok", sa.Boolean, nullable=False),
    sa.Column("error_class", sa.String(100), nullable=True),
    sa.Column("error_code", sa.String(100), nullable=True),
    sa.Column("latency_ms", sa.Float, nullable=False),
    sa.Column("trace_id", sa.String(32), nullable=True),
    sa.Column("result", JSON, nullable=True),
    sa.Column("started_at", UtcDateTime, nullable=False),
    sa.Column("ended_at", UtcDateTime, nullable=False),
    sa.Column("category", sa.String(20), nullable=True),
    sa.Column("policy", JSON, nullable=True),
    sa.Column("args_hash", sa.String(64), nullable=True),
    sa.UniqueConstraint("conversation_id", "tool_call_id", name="uq_tool_calls_conversation_tool_call"),
)

audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("action", sa.String(100), nullable=False),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("conversation_id", sa.Uuid, nullable=True),
    sa.Column("run_id", sa.Uuid, nullable=True),
    sa.Column("correlation_id", sa.Uuid, nullable=True),
    sa.Column("details", JSON, nullable=False),
    sa.Column("trace_id", sa.String(32), nullable=True),
    sa.Column("seq", sa.BigInteger, nullable=True),
    sa.Column("prev_hash", sa.String(64), nullable=True),
    sa.Column("hash", sa.String(64), nullable=True),
    sa.Index("ix_audit_log_conversation_id_id", "conversation_id", "id"),
    sa.Index("ix_audit_log_correlation_id", "correlation_id"),
    sa.Index("ix_audit_log_workspace_id", "workspace", "id"),
)

outbox = sa.Table(
    "outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("topic", sa.String(200), nullable=False),
    sa.Column("payload", JSON, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("source_event_id", sa.String(100), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("next_attempt_at", UtcDateTime, nullable=True),
    sa.Column("delivered_at", UtcDateTime, nullable=True),
    sa.Column("conversation_id", sa.Uuid, nullable=True),
    sa.Index("ix_outbox_undelivered_id", "id", postgresql_where=UNDELIVERED, sqlite_where=UNDELIVERED),
)

failure_clusters = sa.Table(
    "failure_clusters",
    metadata,
    sa.Column("id", sa.String(100), primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("signature", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("notes", sa.Text, nullable=True),
    sa.Column("first_seen", UtcDateTime, nullable=False),
    sa.Column("last_seen", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

dead_letters = sa.Table(
    "dead_letters",
    metadata,
    sa.Column("id", sa.String(100), primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("outbox_id", sa.Integer, nullable=True),
    sa.Column("topic", sa.String(200), nullable=False),
    sa.Column("payload", JSON, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("cluster_id", sa.String(100), sa.ForeignKey("failure_clusters.id"), nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("replay_count", sa.Integer, nullable=False),
    sa.Column("failed_at", UtcDateTime, nullable=False),
    sa.Column("replayed_at", UtcDateTime, nullable=True),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("prefix", sa.String(20), nullable=False),
    sa.Column("key_hash", sa.String(128), nullable=False, unique=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("workspace", sa.String(100), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("revoked_at", UtcDateTime, nullable=True),
    sa.Column("expires_at", UtcDateTime, nullable=True),
    sa.Column("person", sa.String(300), nullable=True),
)

authorizations = sa.Table(
    "authorizations",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False, index=True),
    sa.Column("tool_name", sa.String(200), nullable=False),
    sa.Column("args_match", JSON, nullable=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=True),
    sa.Column("revoked_at", UtcDateTime, nullable=True),
    sa.Column("seal", sa.String(200), nullable=True),
)

PENDING_EVENTS = sa.text(
    "type IN ('pending.created', 'pending.resolved', 'pending.vote', 'pending.reminded', "
    "'pending.escalated', 'conversation.started')"
)
"""Exactly the types of `PENDING_EVENT_TYPES` (what the workspace stream reads), so its partial
indexes serve its queries (`tests/unit/test_pending_event_index.py`)."""

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("conversation_id", sa.Uuid, nullable=False),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("type", sa.String(50), nullable=False),
    sa.Column("data", JSON, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Index("ix_events_conversation_id_id", "conversation_id", "id"),
    # The workspace-wide stream of pending calls reads only these rows.
    sa.Index("ix_events_pending_id", "id", postgresql_where=PENDING_EVENTS, sqlite_where=PENDING_EVENTS),
    sa.Index(
        "ix_events_pending_workspace_id",
        "workspace",
        "id",
        postgresql_where=PENDING_EVENTS,
        sqlite_where=PENDING_EVENTS,
    ),
)

webhooks = sa.Table(
    "webhooks",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False, index=True),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("events", JSON, nullable=False),
    sa.Column("secret", sa.String(200), nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
)
