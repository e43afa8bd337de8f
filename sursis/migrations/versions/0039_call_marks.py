"""audit_log indexed by the call a row names: a call's newest mark found without reading its
conversation's whole log

Before an at-most-once call runs, the statement that writes its dispatch mark asks whether the
call's newest mark is a dispatch (`AuditRepository.append_unless_newest`). A call just approved has
no mark yet, so the conversation's index (0028) was walked newest first to its very first row,
every row of the marks' actions read and set aside: a cost that grew with the conversation's
length (2.2 ms of PostgreSQL's time a turn at its 600th turn, against 0.13 at its first). The
rows that name a call are indexed by (conversation, call, id), and the rows whose details are
sealed (a JSON string: whether they name the call cannot be told in SQL) by (conversation, id);
each is a partial index, so the rest of the log costs no index entry. PostgreSQL only: SQLite
reads the marks in Python.

Revision ID: 0039_call_marks
Revises: 0038_lift_seal
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0039_call_marks"
down_revision: str | None = "0038_lift_seal"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE INDEX ix_audit_log_call_marks ON audit_log "
        "(conversation_id, (details ->> 'tool_call_id'), id) WHERE details ? 'tool_call_id'"
    )
    op.execute(
        "CREATE INDEX ix_audit_log_sealed_rows ON audit_log (conversation_id, id) "
        "WHERE jsonb_typeof(details) <> 'object'"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("ix_audit_log_sealed_rows", table_name="audit_log")
    op.drop_index("ix_audit_log_call_marks", table_name="audit_log")
