"""the key that caused a pending call (`pending_calls.requested_by`: its vote never counts unless a
rule says so), and the admin's own condition of an `ask_above` ladder ceiling
(`autonomy_ladder.ceiling_condition`)

Revision ID: 0024_policy
Revises: 0023_approvers
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_policy"
down_revision: str | None = "0024_typed"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("pending_calls", sa.Column("requested_by", sa.String(200), nullable=True))
    op.add_column(
        "autonomy_ladder", sa.Column("ceiling_condition", sa.Text, nullable=False, server_default="")
    )


def downgrade() -> None:
    with op.batch_alter_table("autonomy_ladder") as batch_op:
        batch_op.drop_column("ceiling_condition")
    with op.batch_alter_table("pending_calls") as batch_op:
        batch_op.drop_column("requested_by")
