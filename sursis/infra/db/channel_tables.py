"""Tables of the channels context. Mirrors migration 0010."""

from __future__ import annotations

import sqlalchemy as sa

from sursis.infra.db.tables import JSON, UtcDateTime, metadata

channel_bindings = sa.Table(
    "channel_bindings",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), nullable=True),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("slack_team_id", sa.String(50), nullable=True),
    sa.Column("slack_channel_id", sa.String(50), nullable=True),
    sa.Column("slack_thread_ts", sa.String(50), nullable=True),
    sa.Column("email", sa.String(320), nullable=True),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.UniqueConstraint(
        "slack_team_id", "slack_channel_id", "slack_thread_ts", name="uq_channel_bindings_slack_thread"
    ),
    sa.Index("ix_channel_bindings_conversation_id", "conversation_id"),
    sa.Index("ix_channel_bindings_workspace_kind", "workspace", "kind"),
)

slack_users = sa.Table(
    "slack_users",
    metadata,
    sa.Column("team_id", sa.String(50), primary_key=True),
    sa.Column("user_id", sa.String(50), primary_key=True),
    sa.Column("key_id", sa.Uuid, sa.ForeignKey("api_keys.id"), nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
)

slack_events = sa.Table(
    "slack_events",
    metadata,
    sa.Column("event_id", sa.String(100), primary_key=True),
    sa.Column("received_at", UtcDateTime, nullable=False),
)

slack_posts = sa.Table(
    "slack_posts",
    metadata,
    sa.Column("delivery_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("binding_id", sa.Uuid, sa.ForeignKey("channel_bindings.id"), nullable=False),
    sa.Column("channel_id", sa.String(50), nullable=False),
    sa.Column("ts", sa.String(50), nullable=False),
    sa.Column("correlation_id", sa.Uuid, nullable=True),
    sa.Column("posted_at", UtcDateTime, nullable=False),
    sa.Index("ix_slack_posts_correlation_id", "correlation_id"),
)

email_digests = sa.Table(
    "email_digests",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("binding_id", sa.Uuid, sa.ForeignKey("channel_bindings.id"), nullable=False),
    sa.Column("window_end", UtcDateTime, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("claimed_until", UtcDateTime, nullable=True),
    sa.Column("next_attempt_at", UtcDateTime, nullable=True),
    sa.Column("sent_at", UtcDateTime, nullable=True),
    sa.UniqueConstraint("binding_id", "window_end", name="uq_email_digests_binding_window"),
    sa.Index("ix_email_digests_status", "status"),
)

digest_items = sa.Table(
    "digest_items",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("binding_id", sa.Uuid, sa.ForeignKey("channel_bindings.id"), nullable=False),
    sa.Column("conversation_id", sa.Uuid, nullable=False),
    sa.Column("kind", sa.String(30), nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("data", JSON, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("digest_id", sa.Uuid, sa.ForeignKey("email_digests.id"), nullable=True),
    sa.Index("ix_digest_items_binding_digest", "binding_id", "digest_id"),
)
