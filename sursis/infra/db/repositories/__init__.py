"""SQLAlchemy implementations of the storage ports, one module per record.

They never commit: the unit of work does.
"""

from sursis.infra.db.repositories.audit import SqlAuditRepository
from sursis.infra.db.repositories.conversations import SqlConversationRepository
from sursis.infra.db.repositories.messages import SqlMessageRepository
from sursis.infra.db.repositories.pending import SqlPendingCallRepository
from sursis.infra.db.repositories.runs import SqlRunRepository
from sursis.infra.db.repositories.tool_calls import SqlToolCallRepository

__all__ = [
    "SqlAuditRepository",
    "SqlConversationRepository",
    "SqlMessageRepository",
    "SqlPendingCallRepository",
    "SqlRunRepository",
    "SqlToolCallRepository",
]
