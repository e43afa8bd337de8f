"""The `sampled` rung's rate, and the reminders a call's route sends before its deadline

`autonomy_ladder.one_in` (the rung's N: 1 in N calls it would allow goes to people), with the
admin's own for a `sampled` ceiling and the one an undo goes back to; `pending_routes.reminders_sent`
(how many of the route's reminder fractions the sweeper has sent, so two sweepers never send one twice).

Revision ID: 0037_sampled_reminders
Revises: 0035_key_persons
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0037_sampled_reminders"
down_revision: str | None = "0036_oidc_provisioning"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("autonomy_ladder", sa.Column("one_in", sa.Integer, nullable=True))
    op.add_column("autonomy_ladder", sa.Column("ceiling_one_in", sa.Integer, nullable=True))
    op.add_column("autonomy_ladder", sa.Column("previous_one_in", sa.Integer, nullable=True))
    op.add_column(
        "pending_routes", sa.Column("reminders_sent", sa.Integer, nullable=False, server_default="0")
    )


def downgrade() -> None:
    with op.batch_alter_table("pending_routes") as batch:
        batch.drop_column("reminders_sent")
    with op.batch_alter_table("autonomy_ladder") as batch:
        batch.drop_column("previous_one_in")
        batch.drop_column("ceiling_one_in")
        batch.drop_column("one_in")
