"""indexes that hold at a year of traffic: the inbox by workspace, partial indexes on live states

The queue (`runs` queued/running/suspended), the awaiting pending calls the sweeper reads and the
outbox rows still to deliver are a few rows among millions of finished ones: each is indexed by a
partial index over its live state only, which stays as small as the live set and is the only one
the hot statement can use. The inbox filters by workspace first (see docs/scaling.md).

Revision ID: 0013_volume
Revises: 0012_retain
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_volume"
down_revision: str | None = "0012_retain"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LIVE_RUNS = sa.text("status IN ('queued', 'running', 'suspended')")
AWAITING = sa.text("status = 'awaiting'")
UNDELIVERED = sa.text("status = 'pending'")


def upgrade() -> None:
    op.drop_index("ix_runs_status_created_at", table_name="runs")
    op.create_index(
        "ix_runs_live_status_updated_at",
        "runs",
        ["status", "updated_at"],
        postgresql_where=LIVE_RUNS,
        sqlite_where=LIVE_RUNS,
    )
    op.drop_index("ix_pending_calls_status_expires_at", table_name="pending_calls")
    op.create_index(
        "ix_pending_calls_awaiting_expires_at",
        "pending_calls",
        ["expires_at"],
        postgresql_where=AWAITING,
        sqlite_where=AWAITING,
    )
    op.create_index(
        "ix_pending_calls_workspace_status_created_at",
        "pending_calls",
        ["workspace", "status", "created_at", "correlation_id"],
    )
    op.drop_index("ix_outbox_status_next_attempt_at", table_name="outbox")
    op.create_index(
        "ix_outbox_undelivered_id", "outbox", ["id"], postgresql_where=UNDELIVERED, sqlite_where=UNDELIVERED
    )


def downgrade() -> None:
    op.drop_index("ix_outbox_undelivered_id", table_name="outbox")
    op.create_index("ix_outbox_status_next_attempt_at", "outbox", ["status", "next_attempt_at"])
    op.drop_index("ix_pending_calls_workspace_status_created_at", table_name="pending_calls")
    op.drop_index("ix_pending_calls_awaiting_expires_at", table_name="pending_calls")
    op.create_index("ix_pending_calls_status_expires_at", "pending_calls", ["status", "expires_at"])
    op.drop_index("ix_runs_live_status_updated_at", table_name="runs")
    op.create_index("ix_runs_status_created_at", "runs", ["status", "created_at"])
