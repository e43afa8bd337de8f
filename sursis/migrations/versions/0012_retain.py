"""retention and the audit chain: the audit log's chain columns and per-workspace heads, retention
policies, legal holds, tombstones of purged conversations, the conversation of each outbox row,
and the indexes the sweeper's bounded batches read

The append-only trigger of 0003 is narrowed, not lifted: a row may be sealed once (its chain
columns set from NULL, nothing else changed), and deleted only at or below its workspace's
recorded anchor (a retention cut).

Revision ID: 0012_retain
Revises: 0011_categories
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_retain"
down_revision: str | None = "0011_categories"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
APPEND_ONLY = "audit_log is append-only"
UNSEALED = sa.text("seq IS NULL")
CONTENT = ("id", "at", "actor", "action", "workspace", "conversation_id", "run_id", "correlation_id")

POSTGRES_GUARD = f"""
CREATE OR REPLACE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.hash IS NULL AND NEW.hash IS NOT NULL
        AND ({", ".join("NEW." + c for c in CONTENT)}, NEW.details, NEW.trace_id)
            IS NOT DISTINCT FROM ({", ".join("OLD." + c for c in CONTENT)}, OLD.details, OLD.trace_id) THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' AND OLD.seq IS NOT NULL AND OLD.seq <= COALESCE(
        (SELECT anchor_seq FROM audit_chain_heads WHERE workspace = OLD.workspace), 0) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '{APPEND_ONLY}: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$
"""
POSTGRES_ORIGINAL = f"""
CREATE OR REPLACE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '{APPEND_ONLY}: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$
"""
_SAME = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in (*CONTENT, "details", "trace_id"))
SQLITE_GUARD = [
    "DROP TRIGGER IF EXISTS audit_log_no_update",
    "DROP TRIGGER IF EXISTS audit_log_no_delete",
    f"""
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    WHEN NOT (OLD.hash IS NULL AND NEW.hash IS NOT NULL AND {_SAME})
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE refused'); END
    """,
    f"""
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    WHEN OLD.seq IS NULL OR OLD.seq > COALESCE(
        (SELECT anchor_seq FROM audit_chain_heads WHERE workspace = OLD.workspace), 0)
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: DELETE refused'); END
    """,
]
SQLITE_ORIGINAL = [
    "DROP TRIGGER IF EXISTS audit_log_no_update",
    "DROP TRIGGER IF EXISTS audit_log_no_delete",
    f"""
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE refused'); END
    """,
    f"""
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: DELETE refused'); END
    """,
]


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if not postgres:
        for statement in SQLITE_ORIGINAL[:2]:
            op.execute(statement)  # batch_alter_table copies the table; the guard comes back below
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seq", sa.BigInteger, nullable=True))
        batch_op.add_column(sa.Column("prev_hash", sa.String(64), nullable=True))
        batch_op.add_column(sa.Column("hash", sa.String(64), nullable=True))
        batch_op.create_index("uq_audit_log_workspace_seq", ["workspace", "seq"], unique=True)
    op.create_index(
        "ix_audit_log_unsealed",
        "audit_log",
        ["workspace", "id"],
        postgresql_where=UNSEALED,
        sqlite_where=UNSEALED,
    )
    op.create_table(
        "audit_chain_heads",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("anchor_seq", sa.BigInteger, nullable=False),
        sa.Column("anchor_hash", sa.String(64), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "retention_policies",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("conversation_days", sa.Integer, nullable=True),
        sa.Column("audit_days", sa.Integer, nullable=True),
        sa.Column("updated_by", sa.String(200), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "legal_holds",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("conversation_id", sa.Uuid, nullable=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Index("ix_legal_holds_workspace", "workspace"),
    )
    op.create_table(
        "purged_conversations",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("purged_at", TS, nullable=False),
    )
    op.add_column("outbox", sa.Column("conversation_id", sa.Uuid, nullable=True))
    op.create_index("ix_outbox_conversation_id", "outbox", ["conversation_id"])
    op.create_index("ix_dead_letters_outbox_id", "dead_letters", ["outbox_id"])
    op.create_index("ix_conversations_workspace_updated_at", "conversations", ["workspace", "updated_at"])
    op.create_index("ix_digest_items_conversation_id", "digest_items", ["conversation_id"])
    op.create_index("ix_slack_posts_binding_id", "slack_posts", ["binding_id"])
    op.create_index("ix_email_digests_binding_id", "email_digests", ["binding_id"])
    op.create_index("ix_memories_conversation_id", "memories", ["conversation_id"])
    op.create_index("ix_platform_events_conversation_id", "platform_events", ["conversation_id"])
    op.create_index("ix_world_rules_request_conversation_id", "world_rules", ["request_conversation_id"])
    if postgres:
        op.execute(POSTGRES_GUARD)
    else:
        for statement in SQLITE_GUARD:
            op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.execute(POSTGRES_ORIGINAL)
    else:
        for statement in SQLITE_ORIGINAL[:2]:
            op.execute(statement)
    op.drop_index("ix_world_rules_request_conversation_id", "world_rules")
    op.drop_index("ix_platform_events_conversation_id", "platform_events")
    op.drop_index("ix_memories_conversation_id", "memories")
    op.drop_index("ix_email_digests_binding_id", "email_digests")
    op.drop_index("ix_slack_posts_binding_id", "slack_posts")
    op.drop_index("ix_digest_items_conversation_id", "digest_items")
    op.drop_index("ix_conversations_workspace_updated_at", "conversations")
    op.drop_index("ix_dead_letters_outbox_id", "dead_letters")
    op.drop_index("ix_outbox_conversation_id", "outbox")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_column("conversation_id")
    op.drop_table("purged_conversations")
    op.drop_table("legal_holds")
    op.drop_table("retention_policies")
    op.drop_table("audit_chain_heads")
    op.drop_index("ix_audit_log_unsealed", "audit_log")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("uq_audit_log_workspace_seq")
        batch_op.drop_column("hash")
        batch_op.drop_column("prev_hash")
        batch_op.drop_column("seq")
    if not postgres:
        for statement in SQLITE_ORIGINAL:
            op.execute(statement)
