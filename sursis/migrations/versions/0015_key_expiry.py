"""api keys: an optional expiry (`expires_at`); a key past it is refused like a revoked one

Revision ID: 0015_key_expiry
Revises: 0014_crypto
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_key_expiry"
down_revision: str | None = "0014_crypto"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("expires_at")
