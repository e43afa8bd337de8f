"""audit log: an update that changes nothing but `details` is allowed, so `sursis encryption
rotate` can re-encrypt audit rows under a new key; every other update and every delete is still
refused (the plaintext those details hold does not change: re-encryption keeps it)

Revision ID: 0011_crypto
Revises: 0010_channels
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011_crypto"
down_revision: str | None = "0010_channels"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "audit_log is append-only"

POSTGRES_FUNCTION = """
CREATE OR REPLACE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - 'details') = (to_jsonb(OLD) - 'details') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '{message}: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$
"""
POSTGRES_ORIGINAL = """
CREATE OR REPLACE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '{message}: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$
"""
# SQLite: `UPDATE OF` lists every column but `details`.
SQLITE_UP = [
    "DROP TRIGGER IF EXISTS audit_log_no_update",
    f"""
    CREATE TRIGGER audit_log_no_update
    BEFORE UPDATE OF id, at, actor, action, workspace, conversation_id, run_id, correlation_id, trace_id
    ON audit_log
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE refused'); END
    """,
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS audit_log_no_update",
    f"""
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE refused'); END
    """,
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_FUNCTION.format(message=APPEND_ONLY))
    else:
        for statement in SQLITE_UP:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_ORIGINAL.format(message=APPEND_ONLY))
    else:
        for statement in SQLITE_DOWN:
            op.execute(statement)
