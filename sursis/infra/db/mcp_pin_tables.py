"""The pinned descriptions of MCP tools. Mirrors migration 0024."""

from __future__ import annotations

import sqlalchemy as sa

from sursis.infra.db.tables import JSON, UtcDateTime, metadata

mcp_tool_pins = sa.Table(
    "mcp_tool_pins",
    metadata,
    sa.Column("agent", sa.String(100), primary_key=True),
    sa.Column("tool", sa.String(200), primary_key=True),
    sa.Column("server", sa.String(200), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("description", JSON, nullable=False),
    sa.Column("accepted_by", sa.String(200), nullable=False),
    sa.Column("accepted_at", UtcDateTime, nullable=False),
    sa.Column("changed_digest", sa.String(64), nullable=True),
    sa.Column("changed_description", JSON, nullable=True),
    sa.Column("changed_at", UtcDateTime, nullable=True),
)
