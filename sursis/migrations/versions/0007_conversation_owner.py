"""conversations: the principal (API key id) that created each one

Revision ID: 0007_conversation_owner
Revises: 0006_run_attempts

Existing rows keep `created_by` NULL: they were created before owners were recorded and are
nobody's own, so only operators and admins answer their calls. No foreign key: a principal id
may be a key id or another actor (`cli`), and a revoked key stays the owner of what it created.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_conversation_owner"
down_revision: str | None = "0006_run_attempts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("conversations", sa.Column("created_by", sa.String(length=200), nullable=True))


def downgrade() -> None:
    # A plain ALTER TABLE (SQLite >= 3.35 drops columns itself): a batch rebuild would drop and
    # re-create `conversations`, which the foreign keys of messages, runs and pending calls refuse.
    op.drop_column("conversations", "created_by")
