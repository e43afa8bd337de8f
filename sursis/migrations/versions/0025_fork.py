"""conversations: where a fork was made from (the original conversation and the seq of its message)

Revision ID: 0025_fork
Revises: 0024_mcp

Both columns stay NULL for a conversation started afresh. No foreign key: retention purges an
original and its forks each on its own clock, and a fork keeps naming the purged original.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025_fork"
down_revision: str | None = "0024_mcp"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("conversations", sa.Column("forked_from_id", sa.Uuid(), nullable=True))
    op.add_column("conversations", sa.Column("forked_from_seq", sa.Integer(), nullable=True))
    op.create_index("ix_conversations_forked_from_id", "conversations", ["forked_from_id"])


def downgrade() -> None:
    # Plain ALTER TABLEs (SQLite >= 3.35 drops columns itself): a batch rebuild would drop and
    # re-create `conversations`, which the foreign keys of messages, runs and pending calls refuse.
    op.drop_index("ix_conversations_forked_from_id", "conversations")
    op.drop_column("conversations", "forked_from_seq")
    op.drop_column("conversations", "forked_from_id")
