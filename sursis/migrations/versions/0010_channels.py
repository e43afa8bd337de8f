"""channels: bindings of conversations to Slack threads and email addresses, Slack users mapped to
keys, Slack event dedupe, Slack posts (for updates and idempotent retries), email digests, and the
channel of each run and message

Revision ID: 0010_channels
Revises: 0009_customer
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010_channels"
down_revision: str | None = "0009_customer"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("runs", sa.Column("channel", sa.String(20), nullable=False, server_default="web"))
    op.add_column("messages", sa.Column("channel", sa.String(20), nullable=True))
    op.create_table(
        "channel_bindings",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), nullable=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("slack_team_id", sa.String(50), nullable=True),
        sa.Column("slack_channel_id", sa.String(50), nullable=True),
        sa.Column("slack_thread_ts", sa.String(50), nullable=True),
        sa.Column("email", sa.String(320), nullable=True),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint(
            "slack_team_id", "slack_channel_id", "slack_thread_ts", name="uq_channel_bindings_slack_thread"
        ),
    )
    op.create_index("ix_channel_bindings_conversation_id", "channel_bindings", ["conversation_id"])
    op.create_index("ix_channel_bindings_workspace_kind", "channel_bindings", ["workspace", "kind"])
    op.create_table(
        "slack_users",
        sa.Column("team_id", sa.String(50), primary_key=True),
        sa.Column("user_id", sa.String(50), primary_key=True),
        sa.Column("key_id", sa.Uuid, sa.ForeignKey("api_keys.id"), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "slack_events",
        sa.Column("event_id", sa.String(100), primary_key=True),
        sa.Column("received_at", TS, nullable=False),
    )
    op.create_table(
        "slack_posts",
        sa.Column("delivery_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("binding_id", sa.Uuid, sa.ForeignKey("channel_bindings.id"), nullable=False),
        sa.Column("channel_id", sa.String(50), nullable=False),
        sa.Column("ts", sa.String(50), nullable=False),
        sa.Column("correlation_id", sa.Uuid, nullable=True),
        sa.Column("posted_at", TS, nullable=False),
    )
    op.create_index("ix_slack_posts_correlation_id", "slack_posts", ["correlation_id"])
    op.create_table(
        "email_digests",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("binding_id", sa.Uuid, sa.ForeignKey("channel_bindings.id"), nullable=False),
        sa.Column("window_end", TS, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("claimed_until", TS, nullable=True),
        sa.Column("next_attempt_at", TS, nullable=True),
        sa.Column("sent_at", TS, nullable=True),
        sa.UniqueConstraint("binding_id", "window_end", name="uq_email_digests_binding_window"),
    )
    op.create_index("ix_email_digests_status", "email_digests", ["status"])
    op.create_table(
        "digest_items",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("binding_id", sa.Uuid, sa.ForeignKey("channel_bindings.id"), nullable=False),
        sa.Column("conversation_id", sa.Uuid, nullable=False),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("digest_id", sa.Uuid, sa.ForeignKey("email_digests.id"), nullable=True),
    )
    op.create_index("ix_digest_items_binding_digest", "digest_items", ["binding_id", "digest_id"])


def downgrade() -> None:
    op.drop_table("digest_items")
    op.drop_table("email_digests")
    op.drop_table("slack_posts")
    op.drop_table("slack_events")
    op.drop_table("slack_users")
    op.drop_table("channel_bindings")
    with op.batch_alter_table("messages") as batch_op:
        batch_op.drop_column("channel")
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_column("channel")
