"""authorizations.seal: the service's seal of a pre-approval, checked before it lifts an ask

A pre-approval lets a call run without asking anyone, so it is a decision like an approval: where a
keyring is configured the service seals what it grants (workspace, tool, argument match, who
created it, when, until when) in the write that stores it, and the worker lifts an ask only with a
pre-approval whose seal checks (`domain/approvals/decision_seal.py`). Existing rows have no seal: where
decisions are sealed they no longer lift an ask; re-create them after the upgrade
(docs/audit.md).

Revision ID: 0038_lift_seal
Revises: 0035_key_persons
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0038_lift_seal"
down_revision: str | None = "0037_sampled_reminders"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("authorizations", sa.Column("seal", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("authorizations") as batch:
        batch.drop_column("seal")
