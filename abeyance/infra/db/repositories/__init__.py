"""SQLAlchemy implementations of the storage ports, one module per record.

They never commit: the unit of work does.
"""

from abeyance.infra.db.repositories.audit import SqlAuditRepository
from abeyance.infra.db.repositories.conversations import SqlConversationRepository
from abeyance.infra.db.repositories.messages import SqlMessageRepository
from abeyance.infra.db.repositories.pending import SqlPendingCallRepository
from abeyance.infra.db.repositories.runs import SqlRunRepository
from abeyance.infra.db.repositories.tool_calls import SqlToolCallRepository

__all__ = [
    "SqlAuditRepository",
    "SqlConversationRepository",
    "SqlMessageRepository",
    "SqlPendingCallRepository",
    "SqlRunRepository",
    "SqlToolCallRepository",
]
