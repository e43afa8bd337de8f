"""pending calls: the policy decision that made a call wait (`policy`: effect, rule, policy version,
and for an asked call whom it asks, how many, and when it escalates)

Revision ID: 0016_policy_stamp
Revises: 0015_key_expiry
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016_policy_stamp"
down_revision: str | None = "0015_key_expiry"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("pending_calls") as batch:
        batch.add_column(sa.Column("policy", JSONB, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pending_calls") as batch:
        batch.drop_column("policy")
