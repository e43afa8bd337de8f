"""worlds: the World Agent's worlds, rule corpus, decisions and flags, sessions and memories

Revision ID: 0008_worlds
Revises: 0007_conversation_owner

On PostgreSQL the memories get `pg_trgm`: a GIN trigram index for recall, and a trigger that
refuses any memory (also one inserted by hand) whose text is too similar (>= 0.5) to the text of
an enshrined rule of its world.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008_worlds"
down_revision: str | None = "0007_conversation_owner"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)

REFUSE_RULE_CONTENT = """
CREATE FUNCTION memories_refuse_rule_content() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.world_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM world_rules r
        WHERE r.world_id = NEW.world_id AND r.state = 'enshrined' AND similarity(r.text, NEW.text) >= 0.5
    ) THEN
        RAISE EXCEPTION 'memory restates an enshrined rule of world %', NEW.world_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'memories_no_rule_content';
    END IF;
    RETURN NEW;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "worlds",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("domain", sa.String(200), nullable=False),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("workspace", "domain", name="uq_worlds_workspace_domain"),
    )
    op.create_table(
        "world_rules",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("world_id", sa.Uuid(), sa.ForeignKey("worlds.id"), nullable=False),
        sa.Column("state", sa.String(30), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("predicate", sa.Text(), nullable=True),
        sa.Column("applies_when", sa.Text(), nullable=True),
        sa.Column("tests", JSON, nullable=False),
        sa.Column("gate", JSON, nullable=True),
        sa.Column("citations", JSON, nullable=False),
        sa.Column("evidence", JSON, nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("request_conversation_id", sa.Uuid(), nullable=True),
        sa.Column("request_tool_call_id", sa.String(200), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("enshrined_at", TS, nullable=True),
    )
    op.create_index("ix_world_rules_world_state", "world_rules", ["world_id", "state"])
    op.create_table(
        "world_decisions",
        sa.Column("world_id", sa.Uuid(), sa.ForeignKey("worlds.id"), primary_key=True),
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("rule_ids", JSON, nullable=False),
        sa.Column("context", JSON, nullable=False),
        sa.Column("outcome", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "world_flags",
        sa.Column("world_id", sa.Uuid(), sa.ForeignKey("worlds.id"), primary_key=True),
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("decision_id", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["world_id", "decision_id"], ["world_decisions.world_id", "world_decisions.id"]
        ),
    )
    op.create_table(
        "world_sessions",
        sa.Column("conversation_id", sa.Uuid(), sa.ForeignKey("conversations.id"), primary_key=True),
        sa.Column("world_id", sa.Uuid(), sa.ForeignKey("worlds.id"), nullable=False, index=True),
        sa.Column("mode", sa.String(20), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "memories",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("world_id", sa.Uuid(), sa.ForeignKey("worlds.id"), nullable=True),
        sa.Column("agent", sa.String(100), nullable=False),
        sa.Column("tier", sa.String(20), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Uuid(), nullable=True),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_memories_scope", "memories", ["workspace", "agent", "world_id", "tier"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        op.execute("CREATE INDEX ix_memories_text_trgm ON memories USING gin (text gin_trgm_ops)")
        op.execute(REFUSE_RULE_CONTENT)
        op.execute(
            "CREATE TRIGGER memories_no_rule_content BEFORE INSERT OR UPDATE OF text, world_id ON memories "
            "FOR EACH ROW EXECUTE FUNCTION memories_refuse_rule_content()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS memories_no_rule_content ON memories")
        op.execute("DROP FUNCTION IF EXISTS memories_refuse_rule_content()")
    op.drop_table("memories")
    op.drop_table("world_sessions")
    op.drop_table("world_flags")
    op.drop_table("world_decisions")
    op.drop_index("ix_world_rules_world_state", table_name="world_rules")
    op.drop_table("world_rules")
    op.drop_table("worlds")
