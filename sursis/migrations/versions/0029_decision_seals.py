"""pending_calls.ask_seal and pending_votes.seal: the service's seals of an ask and of each vote

A decision is evidence, not a flag: where a keyring is configured the service seals the route a call
was asked with (`ask_seal`), each vote (`seal`) and each decision (inside the sealed `resolution`),
and the worker runs an approved call only when those seals check (`domain/approvals/decision_seal.py`).
Existing rows have no seal: calls approved before the upgrade and not yet run are refused where
decisions are sealed (docs/audit.md: drain them first).

Revision ID: 0029_decision_seals
Revises: 0028_audit_marks
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029_decision_seals"
down_revision: str | None = "0028_audit_marks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("pending_calls", sa.Column("ask_seal", sa.String(200), nullable=True))
    op.add_column("pending_votes", sa.Column("seal", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("pending_votes", "seal")
    op.drop_column("pending_calls", "ask_seal")
