"""runs: consecutive claims of a run without progress

Revision ID: 0006_run_attempts
Revises: 0005_pending_events

`claims` counts the segments started since the run last reached a persistence point; a run
whose segments keep dying before one is failed instead of being re-queued forever. Existing
rows start at 0.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_run_attempts"
down_revision: str | None = "0005_pending_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("claims", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    # A plain ALTER TABLE (SQLite >= 3.35 drops columns itself): a batch rebuild would drop and
    # re-create `runs`, which the foreign key of pending calls refuses.
    op.drop_column("runs", "claims")
