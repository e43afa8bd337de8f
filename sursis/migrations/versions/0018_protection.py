"""data protection: the key check value of every key id a database has used (its presence says the
database holds encrypted values), the time of each audit chain's newest sealed row (sealing refuses
rows older than it), and each workspace's latest signed checkpoint of its chain head

Revision ID: 0018_protection
Revises: 0016_policy_stamp
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_protection"
down_revision: str | None = "0016_policy_stamp"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "encryption_keys",
        sa.Column("key_id", sa.String(32), primary_key=True),
        sa.Column("check_value", sa.String(64), nullable=False),
        sa.Column("first_used_at", TS, nullable=False),
    )
    op.add_column("audit_chain_heads", sa.Column("sealed_at", TS, nullable=True))
    op.create_table(
        "audit_checkpoints",
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("anchor_seq", sa.BigInteger, nullable=False),
        sa.Column("anchor_hash", sa.String(64), nullable=False),
        sa.Column("signed_at", TS, nullable=False),
        sa.Column("signer", sa.String(64), nullable=False),
        sa.Column("signature", sa.String(200), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("audit_checkpoints")
    # Not a batch copy on SQLite: audit_log's delete trigger names audit_chain_heads, and renaming
    # a copy into its place fails; both databases drop a column in place.
    op.execute("ALTER TABLE audit_chain_heads DROP COLUMN sealed_at")
    op.drop_table("encryption_keys")
