"""People's sign-in in the database: provisioning rules admins write, sign-ins in progress, sessions

Rules: a provider group → a role and a workspace, stored by admins over the API on top of
`SURSIS_OIDC_GROUPS`. Sign-ins and sessions are kept by the hash of their `state` and cookie, so
that every API process serves every signed-in person; the refresh token is sealed when encryption
is on.

Revision ID: 0036_oidc_provisioning
Revises: 0035_key_persons
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0036_oidc_provisioning"
down_revision: str | None = "0035_key_persons"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "oidc_provisioning_rules",
        sa.Column("provider_group", sa.String(200), primary_key=True),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("workspace", sa.String(100), nullable=True),
        sa.Column("updated_by", sa.String(300), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "person_sign_ins",
        sa.Column("state_hash", sa.String(64), primary_key=True),
        sa.Column("nonce", sa.String(100), nullable=False),
        sa.Column("verifier", sa.String(100), nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_index("ix_person_sign_ins_expires_at", "person_sign_ins", ["expires_at"])
    op.create_table(
        "person_sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("person", sa.String(300), nullable=False),
        sa.Column("name", sa.String(300), nullable=True),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("workspace", sa.String(100), nullable=True),
        sa.Column("groups", JSON, nullable=False),
        sa.Column("refresh_token", sa.Text, nullable=True),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("refreshed_at", sa.Float, nullable=False),
    )
    op.create_index("ix_person_sessions_expires_at", "person_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_person_sessions_expires_at", "person_sessions")
    op.drop_table("person_sessions")
    op.drop_index("ix_person_sign_ins_expires_at", "person_sign_ins")
    op.drop_table("person_sign_ins")
    op.drop_table("oidc_provisioning_rules")
