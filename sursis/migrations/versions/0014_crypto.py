"""audit log: besides sealing a row into the chain and purging below the anchor, an update that
changes nothing but `details` is allowed, so `sursis encryption rotate` can re-encrypt audit rows
under a new key (the plaintext those details hold does not change, so neither does a row's chain
hash); every other update and delete is still refused

Revision ID: 0014_crypto
Revises: 0013_volume
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014_crypto"
down_revision: str | None = "0013_volume"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "audit_log is append-only"
CONTENT = ("id", "at", "actor", "action", "workspace", "conversation_id", "run_id", "correlation_id")
CHAIN = ("seq", "prev_hash", "hash")


def _postgres_guard(rotate: bool) -> str:
    rotation = (
        """
    IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - 'details') = (to_jsonb(OLD) - 'details') THEN
        RETURN NEW;
    END IF;"""
        if rotate
        else ""
    )
    return f"""
CREATE OR REPLACE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.hash IS NULL AND NEW.hash IS NOT NULL
        AND ({", ".join("NEW." + c for c in CONTENT)}, NEW.details, NEW.trace_id)
            IS NOT DISTINCT FROM ({", ".join("OLD." + c for c in CONTENT)}, OLD.details, OLD.trace_id) THEN
        RETURN NEW;
    END IF;{rotation}
    IF TG_OP = 'DELETE' AND OLD.seq IS NOT NULL AND OLD.seq <= COALESCE(
        (SELECT anchor_seq FROM audit_chain_heads WHERE workspace = OLD.workspace), 0) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '{APPEND_ONLY}: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def _same(columns: Sequence[str]) -> str:
    return " AND ".join(f"NEW.{c} IS OLD.{c}" for c in columns)


def _sqlite_update_guard(rotate: bool) -> list[str]:
    sealing = f"(OLD.hash IS NULL AND NEW.hash IS NOT NULL AND {_same((*CONTENT, 'details', 'trace_id'))})"
    allowed = f"{sealing} OR ({_same((*CONTENT, 'trace_id', *CHAIN))})" if rotate else sealing
    return [
        "DROP TRIGGER IF EXISTS audit_log_no_update",
        f"""
        CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
        WHEN NOT ({allowed})
        BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE refused'); END
        """,
    ]


def _apply(rotate: bool) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_postgres_guard(rotate))
    else:
        for statement in _sqlite_update_guard(rotate):
            op.execute(statement)


def upgrade() -> None:
    _apply(rotate=True)


def downgrade() -> None:
    _apply(rotate=False)
