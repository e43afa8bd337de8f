"""audit log: trace id, indexes for its filters, and a trigger that keeps it append-only

Revision ID: 0003_observability
Revises: 0001

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_observability"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "audit_log is append-only"

POSTGRES_UP = [
    f"""
    CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION '{APPEND_ONLY}: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
    END
    $$
    """,
    """
    CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change()
    """,
]
POSTGRES_DOWN = [
    "DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log",
    "DROP FUNCTION IF EXISTS audit_log_refuse_change()",
]
SQLITE_UP = [
    f"""
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE refused'); END
    """,
    f"""
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: DELETE refused'); END
    """,
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS audit_log_no_update",
    "DROP TRIGGER IF EXISTS audit_log_no_delete",
]


def upgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("trace_id", sa.String(length=32), nullable=True))
        batch_op.create_index("ix_audit_log_conversation_id", ["conversation_id"], unique=False)
        batch_op.create_index("ix_audit_log_correlation_id", ["correlation_id"], unique=False)
        batch_op.create_index("ix_audit_log_workspace_id", ["workspace", "id"], unique=False)
    statements = POSTGRES_UP if op.get_bind().dialect.name == "postgresql" else SQLITE_UP
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    statements = POSTGRES_DOWN if op.get_bind().dialect.name == "postgresql" else SQLITE_DOWN
    for statement in statements:
        op.execute(statement)
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_log_workspace_id")
        batch_op.drop_index("ix_audit_log_correlation_id")
        batch_op.drop_index("ix_audit_log_conversation_id")
        batch_op.drop_column("trace_id")
