"""policies: a workspace's versioned policy (`policies`), its autonomy ladder (`autonomy_ladder`),
and the decision each executed tool call was made under (`tool_calls.policy`)

Stored pre-approvals (`authorizations`) are left as they are: the policy point reads them as rules
(after the workspace's own rules), so every one keeps working unchanged.

Revision ID: 0022_policies
Revises: 0019_agents
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0022_policies"
down_revision: str | None = "0019_agents"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "policies",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("rules", JSONB, nullable=False),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "autonomy_ladder",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("tool", sa.String(200), primary_key=True),
        sa.Column("ceiling", sa.String(20), nullable=False),
        sa.Column("level", sa.String(20), nullable=True),
        sa.Column("condition", sa.Text, nullable=False, server_default=""),
        sa.Column("pin", sa.String(200), nullable=True),
        sa.Column("previous_level", sa.String(20), nullable=True),
        sa.Column("previous_condition", sa.Text, nullable=False, server_default=""),
        sa.Column("updated_by", sa.String(200), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
    )
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("policy", JSONB, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("policy")
    op.drop_table("autonomy_ladder")
    op.drop_table("policies")
