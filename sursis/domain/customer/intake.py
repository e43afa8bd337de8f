"""Receiving platform events: the event, the rows it carries and the conversation it starts, in one
transaction."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sursis.domain.access import Permission
from sursis.domain.agents.agent_ports import RunNotifier
from sursis.domain.clock import Clock, utcnow
from sursis.domain.customer._events import proactive_turn
from sursis.domain.errors import NotFound
from sursis.domain.events.events import EventType, publish, publish_run_status
from sursis.domain.paging import Page
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import AuditEntry, Conversation, Principal, Run
from sursis.domain.records.customer_records import (
    Intake,
    ListedConversation,
    PlatformEvent,
    PlatformEventType,
)
from sursis.domain.states import RunStatus

CUSTOMER_AGENT = "customer"
SYSTEM_INITIATOR = "system"


class EventIntakeService:
    """`POST /v1/events`: idempotent on the sender's event id, all or nothing."""

    def __init__(self, uow: UnitOfWorkFactory, notifier: RunNotifier, *, clock: Clock = utcnow) -> None:
        self._uow = uow
        self._notifier = notifier
        self._clock = clock

    def workspace_for(self, principal: Principal, requested: str | None) -> str:
        """The event's workspace: the key's own, or for an admin key the one the body names."""
        principal.require(Permission.POST_EVENTS)
        workspace = requested or principal.workspace
        if workspace is None or not principal.can_see(workspace):
            raise NotFound("workspace not found")
        return workspace

    async def receive(self, principal: Principal, event: PlatformEvent) -> Intake:
        principal.require(Permission.POST_EVENTS)
        now = self._clock()
        turn = proactive_turn(event)
        run: Run | None = None
        async with self._uow() as uow:
            if (earlier := await uow.customer.get_event(event.workspace, event.id)) is not None:
                return earlier
            conversation_id: uuid.UUID | None = None
            if turn is not None:
                run = await self._start_conversation(uow, principal, event, turn.prompt, now)
                conversation_id = run.conversation_id
            if not await uow.customer.add_event(event, now, principal.id, conversation_id):
                # Posted concurrently under the same id: that post's effects are the only ones.
                run = None
            else:
                await _apply(uow, event, now)
                await uow.audit.append(
                    AuditEntry(
                        action="event.received",
                        actor=principal.id,
                        workspace=event.workspace,
                        conversation_id=conversation_id,
                        run_id=run.id if run else None,
                        details={"event_id": event.id, "type": event.type.value},
                    ),
                    now,
                )
                await uow.commit()
                return Intake(
                    event.id,
                    event.type,
                    event.workspace,
                    False,
                    now,
                    conversation_id,
                    run.id if run else None,
                )
        async with self._uow() as uow:
            earlier = await uow.customer.get_event(event.workspace, event.id)
        if earlier is None:
            raise RuntimeError("an event id was taken but its event cannot be read")
        return earlier

    async def recent_conversations(
        self,
        principal: Principal,
        workspace: str | None,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None = None,
    ) -> Page[ListedConversation, tuple[datetime, uuid.UUID]]:
        """`GET /v1/conversations`: the newest conversations the caller may see, those that events
        started among them (initiator `system`), one keyset page at a time."""
        principal.require(Permission.CONVERSE)
        scope = workspace or principal.workspace
        if scope is None and not principal.may(Permission.ALL_WORKSPACES):
            raise NotFound("workspace not found")
        if scope is not None and not principal.can_see(scope):
            raise NotFound("workspace not found")
        async with self._uow() as uow:
            rows = await uow.customer.recent_conversations(scope, limit + 1, after)
        return Page.of(rows, limit, lambda listed: (listed.conversation.created_at, listed.conversation.id))

    async def notify(self, intake: Intake) -> None:
        """Wake a worker for the run an event queued (after the commit)."""
        if intake.run_id is not None and not intake.duplicate:
            await self._notifier.run_queued(intake.run_id)

    @staticmethod
    async def _start_conversation(
        uow: UnitOfWork, principal: Principal, event: PlatformEvent, prompt: str, now: datetime
    ) -> Run:
        conversation = Conversation.open(event.workspace, CUSTOMER_AGENT, principal.id, now)
        run = Run.queued(conversation.id, event.workspace, CUSTOMER_AGENT, prompt, now, channel="system")
        conversation.active_run_id = run.id  # taken by its first run from the start
        await uow.conversations.add(conversation)
        await uow.runs.add(run)
        await uow.audit.append(
            AuditEntry.of_run(
                "run.queued", principal.id, run, {"initiator": SYSTEM_INITIATOR, "event_id": event.id}
            ),
            now,
        )
        await publish(
            uow,
            conversation.id,
            event.workspace,
            EventType.CONVERSATION_STARTED,
            {
                "conversation_id": str(conversation.id),
                "run_id": str(run.id),
                "agent": CUSTOMER_AGENT,
                "initiator": SYSTEM_INITIATOR,
                "event": {"id": event.id, "type": event.type.value},
            },
            now,
        )
        await publish_run_status(uow, run, RunStatus.QUEUED.value, now)
        return run


async def _apply(uow: UnitOfWork, event: PlatformEvent, now: datetime) -> None:
    """Store the domain rows the event carries."""
    data: dict[str, Any] = event.data
    ws = event.workspace
    match event.type:
        case PlatformEventType.SCAN_COMPLETED:
            scan = event.scan
            if scan is None:
                raise ValueError("a scan.completed event without its scan")
            await uow.customer.upsert_scan(ws, scan, now)
            await uow.customer.add_errors(
                ws,
                [
                    {"source": "scan", "scan_id": scan.id, "message": f"{test}: {error}"}
                    for test, error in scan.failures
                ],
                now,
            )
        case PlatformEventType.ANOMALY_DETECTED:
            observed = f"observed {data['observed']}, baseline {data['baseline']}"
            message = f"{data['kind']} on {data['metric']}: {observed}"
            await uow.customer.add_errors(
                ws, [{"source": "anomaly", "scan_id": data.get("scan_id"), "message": message}], now
            )
        case PlatformEventType.CONFIG_CHANGED:
            await uow.customer.set_framework(ws, data["new"], now)
            if event.rubrics is not None:
                await uow.customer.set_rubrics(ws, event.rubrics)
