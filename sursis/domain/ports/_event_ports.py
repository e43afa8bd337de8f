"""What the domain needs of the event log, webhooks and the outbox (implemented in `sursis.infra.db`);
part of the unit of work (`ports.UnitOfWork`), which re-exports them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Protocol

from sursis.domain.records.event_records import OutboxItem, Outgoing, StoredEvent, Webhook


class EventRepository(Protocol):
    def add(
        self, conversation_id: uuid.UUID, workspace: str, event_type: str, data: dict[str, Any], now: datetime
    ) -> None:
        """Hold one event, written with the transaction's other events when it commits; ids of one
        conversation increase in commit order."""
        ...

    def handed(self, run_id: uuid.UUID) -> None:
        """The run is leased to a worker slot of this process in this transaction: its `queued`
        status wakes no worker (`hand_off.py`)."""
        ...

    def take_undelivered(self) -> list[StoredEvent]:
        """The events written so far in this transaction that a webhook or a channel binding may
        hear of (see `delivery.deliver`), each returned once."""
        ...

    async def after(self, conversation_id: uuid.UUID, after_id: int, limit: int) -> list[StoredEvent]: ...
    async def pending_after(self, workspace: str | None, after_id: int, limit: int) -> list[StoredEvent]:
        """`pending.created`/`pending.resolved` events of a workspace (None: every workspace) after
        `after_id`, in id order."""
        ...

    async def last_pending_id(self, workspace: str | None, created_before: datetime | None) -> int:
        """The highest id of those events (created before `created_before`, when given); 0 if none."""
        ...


class WebhookRepository(Protocol):
    async def add(self, webhook: Webhook) -> None: ...
    async def get(self, webhook_id: uuid.UUID) -> Webhook | None: ...
    async def for_workspace(self, workspace: str | None) -> list[Webhook]: ...
    async def delete(self, webhook_id: uuid.UUID) -> bool: ...
    async def subscribed(self, workspace: str, event_type: str) -> list[Webhook]: ...


class OutboxRepository(Protocol):
    """Notifications waiting to leave the service; written in the transaction that caused them."""

    async def enqueue(self, item: Outgoing, now: datetime) -> int:
        """A delivery, due now; its id."""
        ...

    async def claim_due(
        self, topic_prefix: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[OutboxItem]:
        """Due pending rows, each with `attempts` counted up and hidden until `lease_until`."""
        ...

    async def mark_delivered(self, outbox_id: int, now: datetime) -> None: ...
    async def schedule_retry(self, outbox_id: int, error: str, retry_at: datetime, now: datetime) -> None: ...
    async def mark_dead(
        self, item: OutboxItem, error: str, cluster: tuple[str, str] | None, now: datetime
    ) -> str:
        """Stop retrying: the row becomes a dead letter (id returned) in failure cluster `(id, title)`."""
        ...

    async def discard(self, outbox_id: int, reason: str, now: datetime) -> None:
        """Drop a row that has nowhere to go any more (its webhook was deleted)."""
        ...

    async def status(self, outbox_id: int) -> str | None: ...
