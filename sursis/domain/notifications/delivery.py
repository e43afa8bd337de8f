"""Who hears of an event once it is written: its workspace's webhooks and its conversation's channel
bindings, queued in the transaction that wrote it.

Apart from `events` so that the channels context, which publishes events, and the event stream do
not import each other: this module stands above both.
"""

from __future__ import annotations

from sursis.domain.channels.fanout import CHANNEL_EVENT_TYPES, fan_out
from sursis.domain.events.events import WEBHOOK_EVENT_TYPES, WEBHOOK_TOPIC_PREFIX
from sursis.domain.ports import UnitOfWork
from sursis.domain.records.event_records import Outgoing, StoredEvent

DELIVERED_EVENT_TYPES: frozenset[str] = frozenset(t.value for t in WEBHOOK_EVENT_TYPES) | CHANNEL_EVENT_TYPES
"""Events a webhook or a channel binding may be told of: when written, each is handed to
`deliver` if its workspace has a webhook or its conversation a binding."""

_WEBHOOK_TYPES = frozenset(t.value for t in WEBHOOK_EVENT_TYPES)


async def deliver(uow: UnitOfWork, event: StoredEvent) -> None:
    """Queue the webhook deliveries and channel notices of `event`, just written in this
    transaction, whose workspace has webhooks or whose conversation has bindings."""
    hooks = await uow.webhooks.subscribed(event.workspace, event.type) if event.type in _WEBHOOK_TYPES else []
    bindings = (
        await uow.channels.bindings_for(event.conversation_id, event.workspace)
        if event.type in CHANNEL_EVENT_TYPES
        else []
    )
    if bindings:
        await fan_out(uow, event, bindings)
    for hook in hooks:
        payload = {"webhook_id": str(hook.id), "event": event.envelope()}
        topic = WEBHOOK_TOPIC_PREFIX + event.type
        await uow.outbox.enqueue(
            Outgoing(event.workspace, topic, payload, event.conversation_id), event.created_at
        )
