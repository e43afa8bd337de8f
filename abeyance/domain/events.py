"""The live event stream: what happens in a conversation, stored in order, and who hears of it.

Events are written in the same transaction as the state change they describe (a pending call
created, a decision committed, a run finished), so the stream never tells of something that
was rolled back, and a reader that reconnects with the last id it saw misses nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from abeyance.domain.errors import NotFound
from abeyance.domain.ports import UnitOfWork, UnitOfWorkFactory
from abeyance.domain.records import PendingCall, Principal, Run, StoredEvent


class EventType(StrEnum):
    RUN_STATUS = "run.status"
    MESSAGE_DELTA = "message.delta"
    TOOL_CALL = "tool.call"
    TOOL_PROGRESS = "tool.progress"
    TOOL_RESULT = "tool.result"
    PENDING_CREATED = "pending.created"
    PENDING_RESOLVED = "pending.resolved"
    RUN_COMPLETED = "run.completed"
    RUN_FAILED = "run.failed"


WEBHOOK_EVENT_TYPES: frozenset[EventType] = frozenset(
    {EventType.PENDING_CREATED, EventType.PENDING_RESOLVED, EventType.RUN_COMPLETED, EventType.RUN_FAILED}
)
"""What a webhook may subscribe to: the moments an operator's notifier cares about."""

WEBHOOK_TOPIC_PREFIX = "webhook:"
"""Outbox rows whose topic starts with this are webhook deliveries (`webhook:pending.created`)."""


async def publish(
    uow: UnitOfWork,
    conversation_id: uuid.UUID,
    workspace: str,
    event_type: EventType,
    data: dict[str, Any],
    now: datetime,
) -> StoredEvent:
    """Store one event in the caller's transaction and queue its webhook deliveries with it."""
    event = await uow.events.append(conversation_id, workspace, event_type.value, data, now)
    if event_type in WEBHOOK_EVENT_TYPES:
        for hook in await uow.webhooks.subscribed(workspace, event_type.value):
            await uow.outbox.enqueue(
                workspace,
                WEBHOOK_TOPIC_PREFIX + event_type.value,
                {"webhook_id": str(hook.id), "event": event.envelope()},
                now,
            )
    return event


def pending_link(correlation_id: uuid.UUID) -> dict[str, str]:
    """Where a person decides: the API endpoints, which still demand the caller's own credential."""
    return {
        "pending": f"/v1/pending/{correlation_id}",
        "resolve": f"/v1/pending/{correlation_id}/resolve",
    }


def run_status_data(run: Run | uuid.UUID, status: str) -> dict[str, Any]:
    run_id = run if isinstance(run, uuid.UUID) else run.id
    return {"run_id": str(run_id), "status": status}


def pending_created_data(call: PendingCall) -> dict[str, Any]:
    return {
        "run_id": str(call.run_id),
        "correlation_id": str(call.correlation_id),
        "tool_call_id": call.tool_call_id,
        "tool_name": call.tool_name,
        "agent": call.agent,
        "executor": call.executor.value,
        "kind": call.kind.value,
        "args_summary": call.args_summary,
        "effect_description": call.effect_description,
        "expires_at": call.expires_at.isoformat(),
        "links": pending_link(call.correlation_id),
    }


def pending_resolved_data(call: PendingCall, status: str, resolved_by: str) -> dict[str, Any]:
    return {
        "run_id": str(call.run_id),
        "correlation_id": str(call.correlation_id),
        "tool_call_id": call.tool_call_id,
        "tool_name": call.tool_name,
        "kind": call.kind.value,
        "status": status,
        "resolved_by": resolved_by,
        "links": pending_link(call.correlation_id),
    }


async def publish_pending_resolved(
    uow: UnitOfWork, call: PendingCall, status: str, resolved_by: str, now: datetime
) -> None:
    await publish(
        uow,
        call.conversation_id,
        call.workspace,
        EventType.PENDING_RESOLVED,
        pending_resolved_data(call, status, resolved_by),
        now,
    )


async def publish_run_status(uow: UnitOfWork, run: Run, status: str, now: datetime) -> None:
    await publish(
        uow, run.conversation_id, run.workspace, EventType.RUN_STATUS, run_status_data(run, status), now
    )


@dataclass(frozen=True, slots=True)
class ClientPresence:
    """How long a `client_exec` call waits without a live subscriber, and at most with one."""

    grace: timedelta
    max_wait: timedelta


class EventService:
    """Reading a conversation's event stream, and keeping its client calls alive while it is watched."""

    def __init__(
        self, uow: UnitOfWorkFactory, presence: ClientPresence, *, clock: Callable[[], datetime]
    ) -> None:
        self._uow = uow
        self._presence = presence
        self._clock = clock

    async def events_after(
        self, principal: Principal, conversation_id: uuid.UUID, after_id: int, limit: int
    ) -> list[StoredEvent]:
        async with self._uow() as uow:
            conversation = await uow.conversations.get(conversation_id)
            if conversation is None or not principal.can_see(conversation.workspace):
                raise NotFound("conversation not found")
            return await uow.events.after(conversation_id, after_id, limit)

    async def keep_client_calls_alive(self, conversation_id: uuid.UUID) -> int:
        """A subscriber is connected: push back the expiry of the conversation's awaiting client calls.

        Each call is extended to `now + grace`, but never beyond `created_at + max_wait`, so a
        forgotten browser tab cannot park a run forever. Returns how many calls were extended.
        """
        now = self._clock()
        until = now + self._presence.grace
        async with self._uow() as uow:
            extended = await uow.pending.extend_client_calls(
                conversation_id, until, created_after=until - self._presence.max_wait
            )
            await uow.commit()
        return extended
