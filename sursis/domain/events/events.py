"""The live event stream: what happens in a conversation, stored in order, and who hears of it.

Events are written in the same transaction as the state change they describe (a pending call
created, a decision committed, a run finished), so the stream never tells of something that
was rolled back, and a reader that reconnects with the last id it saw misses nothing.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sursis.domain.access import Permission
from sursis.domain.errors import Forbidden, NotFound
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import PendingCall, Principal, Run
from sursis.domain.records.event_records import StoredEvent
from sursis.domain.retention.retention import raise_if_purged


class EventType(StrEnum):
    RUN_STATUS = "run.status"
    MESSAGE_DELTA = "message.delta"
    TOOL_CALL = "tool.call"
    TOOL_PROGRESS = "tool.progress"
    TOOL_RESULT = "tool.result"
    PENDING_CREATED = "pending.created"
    PENDING_RESOLVED = "pending.resolved"
    PENDING_VOTE = "pending.vote"
    PENDING_REVIEWED = "pending.reviewed"
    PENDING_REMINDED = "pending.reminded"
    PENDING_ESCALATED = "pending.escalated"
    RUN_COMPLETED = "run.completed"
    RUN_FAILED = "run.failed"
    CONVERSATION_STARTED = "conversation.started"
    POLICY_NOTIFIED = "policy.notified"


PENDING_EVENT_TYPES: tuple[str, ...] = (
    EventType.PENDING_CREATED.value,
    EventType.PENDING_RESOLVED.value,
    EventType.PENDING_VOTE.value,
    EventType.PENDING_REMINDED.value,
    EventType.PENDING_ESCALATED.value,
    EventType.CONVERSATION_STARTED.value,
)
"""What the workspace-wide stream carries (`GET /v1/pending/events`): pending calls, and the
conversations the service starts on its own (from platform events)."""

WEBHOOK_EVENT_TYPES: frozenset[EventType] = frozenset(
    {
        EventType.PENDING_CREATED,
        EventType.PENDING_REMINDED,
        EventType.PENDING_RESOLVED,
        EventType.RUN_COMPLETED,
        EventType.RUN_FAILED,
        EventType.CONVERSATION_STARTED,
    }
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
) -> None:
    """Store one event in the caller's transaction; its webhook deliveries and channel notices are
    queued in the same transaction (`delivery.deliver`), so either commits with the event or neither does.

    The event is held and written with the transaction's other events when it commits. The
    statement that writes them also tells, for each event of a `delivery.DELIVERED_EVENT_TYPES` type,
    whether its workspace has webhooks or its conversation bindings at all; only then are they read.
    """
    uow.events.add(conversation_id, workspace, event_type.value, data, now)


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
        "agent_path": call.agent_path,
        "executor": call.executor.value,
        "kind": call.kind.value,
        "category": call.category.value if call.category else None,
        "args_summary": call.args_summary,
        "effect_description": call.effect_description,
        "expires_at": call.expires_at.isoformat(),
        "links": pending_link(call.correlation_id),
        **reviewer_field(call),
    }


def reviewer_field(call: PendingCall) -> dict[str, Any]:
    """`{"reviewer": MODEL}` for a call whose route names a reviewer model: its channels hear of it
    once the reviewer has left it to people (`pending.reviewed`), not before."""
    route = call.policy.route if call.policy is not None else None
    return {"reviewer": route.reviewer.model} if route is not None and route.reviewer is not None else {}


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


class PendingEventCursor:
    """Where one workspace-wide stream of pending events stands.

    Event ids increase in commit order within one conversation only (the per-conversation lock):
    across conversations, a transaction may commit after another one that took a higher id. So
    this cursor does not stop at "the highest id delivered". It keeps reading from `floor`, the
    highest id that was already visible `settle` seconds ago, and remembers which ids above it
    it has delivered. An event is missed only if its transaction commits more than `settle`
    seconds after taking its id (event-writing transactions end right after their events).
    """

    def __init__(self, floor: int, settle: float, seen: Iterable[int] = ()) -> None:
        self.floor = floor
        self._settle = settle
        self._seen = {i for i in seen if i > floor}
        self._high = max(self._seen, default=floor)
        self._marks: deque[tuple[float, int]] = deque()

    def read_limit(self, batch: int) -> int:
        """How many rows to read after `floor` so that `batch` new ones fit after the delivered ones."""
        return len(self._seen) + batch

    def take(self, events: Sequence[StoredEvent], now: float) -> list[StoredEvent]:
        """The events (read in id order after `floor`) not delivered yet, now counted as delivered.

        `now` is a monotonic clock in seconds; the floor rises to what was visible `settle` ago.
        """
        fresh = [e for e in events if e.id > self.floor and e.id not in self._seen]
        self._seen.update(e.id for e in fresh)
        if events and events[-1].id > self._high:
            self._high = events[-1].id
            self._marks.append((now, self._high))
        risen = False
        while self._marks and self._marks[0][0] <= now - self._settle:
            self.floor = max(self.floor, self._marks.popleft()[1])
            risen = True
        if risen:
            self._seen = {i for i in self._seen if i > self.floor}
        return fresh


@dataclass(frozen=True, slots=True)
class ClientPresence:
    """How long a `client_exec` call waits without a live subscriber, and at most with one."""

    grace: timedelta
    max_wait: timedelta


class EventService:
    """Reading a conversation's event stream, and keeping its client calls alive while it is watched."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        presence: ClientPresence,
        *,
        clock: Callable[[], datetime],
        settle: timedelta = timedelta(seconds=10),
    ) -> None:
        self._uow = uow
        self._presence = presence
        self._clock = clock
        self._settle = settle

    @staticmethod
    def pending_scope(principal: Principal) -> str | None:
        """The workspace whose pending events the caller may follow; None: every workspace (admins)."""
        principal.require(Permission.CONVERSE)
        if principal.may(Permission.ALL_WORKSPACES):
            return None
        if principal.workspace is None:
            raise Forbidden("a key without a workspace sees no pending calls")
        return principal.workspace

    async def open_pending_feed(
        self, principal: Principal, resume_after: int | None, now: float, *, batch: int = 500
    ) -> PendingEventCursor:
        """A cursor for `read_pending_feed`.

        Resuming (`resume_after`) delivers everything after that id, and again the events of the
        last `settle` seconds before it, which may have committed late (at least once). A fresh
        feed starts now: what is visible already counts as delivered (the caller lists the
        awaiting calls after opening it), and only what commits from now on is delivered.
        """
        scope = self.pending_scope(principal)
        async with self._uow.reader() as uow:
            floor = await uow.events.last_pending_id(scope, self._clock() - self._settle)
        if resume_after is not None:
            return PendingEventCursor(min(floor, resume_after), self._settle.total_seconds())
        cursor = PendingEventCursor(floor, self._settle.total_seconds())
        while True:
            _, more = await self.read_pending_feed(principal, cursor, now, batch=batch)
            if not more:
                return cursor

    async def read_pending_feed(
        self, principal: Principal, cursor: PendingEventCursor, now: float, *, batch: int = 500
    ) -> tuple[list[StoredEvent], bool]:
        """The next pending events not delivered yet, and whether more are waiting."""
        scope = self.pending_scope(principal)
        limit = cursor.read_limit(batch)
        async with self._uow.reader() as uow:
            events = await uow.events.pending_after(scope, cursor.floor, limit)
        return cursor.take(events, now), len(events) == limit

    async def events_after(
        self, principal: Principal, conversation_id: uuid.UUID, after_id: int, limit: int
    ) -> list[StoredEvent]:
        async with self._uow.reader() as uow:
            conversation = await uow.conversations.get(conversation_id)
            if conversation is None:
                await raise_if_purged(uow, principal, conversation_id)
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
