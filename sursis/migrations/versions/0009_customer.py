"""customer: workspace rows (scans, framework, rubrics, onboarding, errors), platform events,
specialist delegations, and the agent path of a pending call

Revision ID: 0009_customer
Revises: 0008_worlds
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009_customer"
down_revision: str | None = "0008_worlds"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("pending_calls", sa.Column("agent_path", sa.String(length=200), nullable=True))
    op.create_table(
        "platform_events",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("type", sa.String(60), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("occurred_at", TS, nullable=True),
        sa.Column("received_at", TS, nullable=False),
        sa.Column("received_by", sa.String(200), nullable=False),
        sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), nullable=True),
    )
    op.create_table(
        "scans",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("status", sa.String(30), nullable=False),
        sa.Column("verdict", sa.String(30), nullable=True),
        sa.Column("scores", JSON, nullable=False),
        sa.Column("changeset", JSON, nullable=False),
        sa.Column("failures", JSON, nullable=False),
        sa.Column("completed_at", TS, nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("rerun_count", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("ix_scans_workspace_completed_at", "scans", ["workspace", "completed_at"])
    op.create_table(
        "framework_configs",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("config", JSON, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "rubrics",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("threshold", sa.Float, nullable=False),
        sa.Column("weight", sa.Float, nullable=False),
    )
    op.create_table(
        "onboarding",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("steps_done", JSON, nullable=False),
        sa.Column("steps_todo", JSON, nullable=False),
        sa.Column("trace_ingestion", sa.String(30), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "workspace_errors",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("source", sa.String(60), nullable=False),
        sa.Column("scan_id", sa.String(200), nullable=True),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("occurred_at", TS, nullable=False),
    )
    op.create_index("ix_workspace_errors_workspace_id", "workspace_errors", ["workspace", "id"])
    op.create_table(
        "delegations",
        sa.Column("conversation_id", sa.Uuid, sa.ForeignKey("conversations.id"), primary_key=True),
        sa.Column("tool_call_id", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.Uuid, nullable=False),
        sa.Column("specialist", sa.String(100), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("messages", sa.Text, nullable=False),
        sa.Column("deferred", JSON, nullable=True),
        sa.Column("output", sa.Text, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )


def downgrade() -> None:
    for table in ("delegations", "workspace_errors", "onboarding", "rubrics", "framework_configs", "scans"):
        op.drop_table(table)
    op.drop_table("platform_events")
    op.drop_column("pending_calls", "agent_path")
