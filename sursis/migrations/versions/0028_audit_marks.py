"""audit_log indexed by (conversation_id, id): a conversation's newest rows read newest first

A resume reads the newest marks of its call among its conversation's audit rows
(`call_marks.newest_mark`: a page of 8, newest first). With an index on `conversation_id` alone
PostgreSQL read every row of the conversation and sorted them, or walked the whole log backwards
by `id` and filtered it down to the conversation: a cost that grew with the conversation's length
or with everything written since the call waited. Ordered by `id` within the conversation, the read
stops at its page. The old index is a prefix of the new one and goes.

Revision ID: 0028_audit_marks
Revises: 0027_stream
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0028_audit_marks"
down_revision: str | None = "0027_stream"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_audit_log_conversation_id_id", "audit_log", ["conversation_id", "id"])
    op.drop_index("ix_audit_log_conversation_id", table_name="audit_log")


def downgrade() -> None:
    op.create_index("ix_audit_log_conversation_id", "audit_log", ["conversation_id"])
    op.drop_index("ix_audit_log_conversation_id_id", table_name="audit_log")
