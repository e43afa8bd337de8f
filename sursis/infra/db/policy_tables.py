"""Tables of workspace policies and the autonomy ladder. Mirrors migrations 0022_policies, 0024_policy
and 0037_sampled_reminders."""

from __future__ import annotations

import sqlalchemy as sa

from sursis.infra.db.tables import JSON, UtcDateTime, metadata

policies = sa.Table(
    "policies",
    metadata,
    sa.Column("workspace", sa.String(100), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("rules", JSON, nullable=False),
    sa.Column("comment", sa.Text, nullable=True),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
)

autonomy_ladder = sa.Table(
    "autonomy_ladder",
    metadata,
    sa.Column("workspace", sa.String(100), primary_key=True),
    sa.Column("tool", sa.String(200), primary_key=True),
    sa.Column("ceiling", sa.String(20), nullable=False),
    sa.Column("ceiling_condition", sa.Text, nullable=False, server_default=""),
    sa.Column("level", sa.String(20), nullable=True),
    sa.Column("condition", sa.Text, nullable=False, server_default=""),
    sa.Column("pin", sa.String(200), nullable=True),
    sa.Column("previous_level", sa.String(20), nullable=True),
    sa.Column("previous_condition", sa.Text, nullable=False, server_default=""),
    sa.Column("updated_by", sa.String(200), nullable=True),
    sa.Column("updated_at", UtcDateTime, nullable=True),
    sa.Column("one_in", sa.Integer, nullable=True),
    sa.Column("ceiling_one_in", sa.Integer, nullable=True),
    sa.Column("previous_one_in", sa.Integer, nullable=True),
)
