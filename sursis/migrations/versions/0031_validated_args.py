"""pending_calls.validated_args: the arguments the tool will receive, beside the model's

pydantic-ai (2.68 and later) gives each deferred call's arguments as its tool will receive them:
validated against its schema, coerced, defaults filled, rewritten by validation hooks. A person
deciding sees that form, and the call's `args_hash` binds it with the model's arguments. Sealed like
`args`; null where pydantic-ai does not give them, or they are the model's arguments.

Revision ID: 0031_validated_args
Revises: 0028_audit_marks
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSONB = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision: str = "0031_validated_args"
down_revision: str | None = "0030_approval_requests"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pending_calls") as batch:
        batch.add_column(sa.Column("validated_args", JSONB, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pending_calls") as batch:
        batch.drop_column("validated_args")
