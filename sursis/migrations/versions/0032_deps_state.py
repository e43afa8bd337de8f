"""runs.deps_state: an adopted agent's deps state, kept while the run waits

A deps factory builds an agent's deps for each segment; the state part of them (pydantic-ai's
`StateDeps[...]`: a pydantic model or dataclass in `deps.state`) is what the tools changed before a
call was asked about. It is stored with the run when the run suspends, sealed like the run's other
content, and put back into the deps the factory builds for the resumed segment, in any process.

Revision ID: 0032_deps_state
Revises: 0028_audit_marks
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0032_deps_state"
down_revision: str | None = "0031_validated_args"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
    op.add_column("runs", sa.Column("deps_state", json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("deps_state")
