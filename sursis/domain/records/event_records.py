"""Records of the event stream: stored events, webhook subscriptions, outbox items."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event of a conversation's stream; ids increase in commit order within a conversation."""

    id: int
    conversation_id: uuid.UUID
    workspace: str
    type: str
    data: dict[str, Any]
    created_at: datetime

    def envelope(self) -> dict[str, Any]:
        """The JSON shape shared by the event stream and webhook bodies."""
        return {
            "id": self.id,
            "type": self.type,
            "workspace": self.workspace,
            "conversation_id": str(self.conversation_id),
            "created_at": self.created_at.isoformat(),
            "data": self.data,
        }


@dataclass(frozen=True, slots=True)
class Webhook:
    """A workspace's subscription: deliveries of some event types to one URL, signed with `secret`."""

    id: uuid.UUID
    workspace: str
    url: str
    events: tuple[str, ...]
    secret: str
    created_by: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A notification to queue in the outbox: its topic (`webhook:<type>`, `channel:slack`) and
    payload, and the conversation it is about (retention purges it with the conversation)."""

    workspace: str
    topic: str
    payload: dict[str, Any]
    conversation_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One claimed outbox row on its way out."""

    id: int
    workspace: str
    topic: str
    payload: dict[str, Any]
    attempts: int
    source_event_id: str | None
