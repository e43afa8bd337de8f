"""mcp_tool_pins: the accepted description of each MCP tool (its digest and what the server said),
and a changed description waiting for an admin

Revision ID: 0024_mcp
Revises: 0023_approvers
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0024_mcp"
down_revision: str | None = "0024_bind"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "mcp_tool_pins",
        sa.Column("agent", sa.String(100), primary_key=True),
        sa.Column("tool", sa.String(200), primary_key=True),
        sa.Column("server", sa.String(200), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("description", JSONB, nullable=False),
        sa.Column("accepted_by", sa.String(200), nullable=False),
        sa.Column("accepted_at", AT, nullable=False),
        sa.Column("changed_digest", sa.String(64), nullable=True),
        sa.Column("changed_description", JSONB, nullable=True),
        sa.Column("changed_at", AT, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("mcp_tool_pins")
