"""api_keys.person: the person (`oidc:<subject>`) an admin linked a key to

One person is one approver whatever they sign in with: a key linked to a person votes as that
person, so a second key of theirs, or their own sign-in, cannot make a second vote of a quorum, and
a call one of their keys caused is their own.

Revision ID: 0035_key_persons
Revises: 0032_deps_state
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0035_key_persons"
down_revision: str | None = "0032_deps_state"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("person", sa.String(300), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("person")
