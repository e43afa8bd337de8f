"""partial indexes for the workspace-wide stream of pending events

Revision ID: 0005_pending_events
Revises: 0004_events

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_pending_events"
down_revision: str | None = "0004_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = sa.text("type IN ('pending.created', 'pending.resolved')")


def upgrade() -> None:
    op.create_index("ix_events_pending_id", "events", ["id"], postgresql_where=PENDING, sqlite_where=PENDING)
    op.create_index(
        "ix_events_pending_workspace_id",
        "events",
        ["workspace", "id"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )


def downgrade() -> None:
    op.drop_index("ix_events_pending_workspace_id", table_name="events")
    op.drop_index("ix_events_pending_id", table_name="events")
