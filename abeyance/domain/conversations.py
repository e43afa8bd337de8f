"""Conversations as their users hold them: start one, read it, post a message (which queues a run)."""

from __future__ import annotations

import uuid
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from abeyance.domain.access import Permission
from abeyance.domain.clock import Clock, utcnow
from abeyance.domain.errors import NotFound, RunActive, ValidationFailed
from abeyance.domain.events import publish_run_status
from abeyance.domain.ports import (
    NoMetrics,
    RunNotifier,
    ServiceMetrics,
    ToolCatalog,
    UnitOfWork,
    UnitOfWorkFactory,
)
from abeyance.domain.records import AuditEntry, Conversation, PendingCall, Principal, Run, StoredMessage
from abeyance.domain.runs import RunView
from abeyance.domain.states import PendingStatus, RunStatus


@dataclass(frozen=True, slots=True)
class ConversationDetail:
    """A conversation, its message log and its active run (with that run's awaiting calls)."""

    conversation: Conversation
    messages: list[StoredMessage]
    active_run: RunView | None


@dataclass
class ConversationService:
    """Start a conversation with an agent, read it, and post the user's messages to it."""

    uow: UnitOfWorkFactory
    catalog: ToolCatalog
    notifier: RunNotifier
    _: KW_ONLY
    clock: Clock = utcnow
    max_content_chars: int = 32_000
    metrics: ServiceMetrics = field(default_factory=NoMetrics)

    async def create_conversation(
        self, principal: Principal, agent: str, workspace: str | None
    ) -> Conversation:
        if agent not in self.catalog.agent_names():
            raise ValidationFailed(
                f"unknown agent {agent!r}", extra={"errors": [{"loc": ["agent"], "msg": "unknown agent"}]}
            )
        ws = workspace or principal.workspace or "default"
        if not principal.can_see(ws):
            raise NotFound("workspace not found")
        principal.require(Permission.CONVERSE)
        conversation = Conversation.open(ws, agent, principal.id, self.clock())
        async with self.uow() as uow:
            await uow.conversations.add(conversation)
            await uow.commit()
        return conversation

    async def get_conversation(self, principal: Principal, conversation_id: uuid.UUID) -> Conversation:
        async with self.uow() as uow:
            return await visible_conversation(uow, principal, conversation_id)

    async def conversation_detail(
        self, principal: Principal, conversation_id: uuid.UUID
    ) -> ConversationDetail:
        async with self.uow() as uow:
            conversation = await visible_conversation(uow, principal, conversation_id)
            messages = await uow.messages.read(conversation_id)
            active = None
            if conversation.active_run_id is not None:
                run = await uow.runs.get(conversation.active_run_id)
                if run is not None:
                    pending = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
                    active = RunView(run=run, pending=pending)
            return ConversationDetail(conversation, messages, active)

    async def post_message(self, principal: Principal, conversation_id: uuid.UUID, content: str) -> Run:
        """Write the user message's run as `queued`; the worker turns it into messages."""
        if not content.strip():
            raise ValidationFailed(
                "content is empty", extra={"errors": [{"loc": ["content"], "msg": "empty"}]}
            )
        if len(content) > self.max_content_chars:
            raise ValidationFailed(
                f"content is longer than {self.max_content_chars} characters",
                extra={"errors": [{"loc": ["content"], "msg": "too long"}]},
            )
        now = self.clock()
        async with self.uow() as uow:
            conversation = await visible_conversation(uow, principal, conversation_id)
            run = Run.queued(conversation.id, conversation.workspace, conversation.agent, content, now)
            if not await uow.conversations.claim_active_run(conversation.id, run.id, now):
                raise await _run_active(uow, conversation.id)
            await uow.runs.add(run)
            await uow.audit.append(AuditEntry.of_run("run.queued", principal.id, run), now)
            await publish_run_status(uow, run, RunStatus.QUEUED.value, now)
            await uow.commit()
        self.metrics.run_status(RunStatus.QUEUED)
        await self.notifier.run_queued(run.id)
        return run


async def visible_conversation(
    uow: UnitOfWork, principal: Principal, conversation_id: uuid.UUID
) -> Conversation:
    """The conversation, if the principal may converse in its workspace; `NotFound` otherwise."""
    conversation = await uow.conversations.get(conversation_id)
    if conversation is None or not principal.can_see(conversation.workspace):
        raise NotFound("conversation not found")
    principal.require(Permission.CONVERSE)
    return conversation


async def _run_active(uow: UnitOfWork, conversation_id: uuid.UUID) -> RunActive:
    """The refusal of a second message while a run is unfinished: which run, and what it waits for."""
    fresh = await uow.conversations.get(conversation_id)
    active = fresh.active_run_id if fresh else None
    pending = await uow.pending.for_run(active, PendingStatus.AWAITING) if active else []
    return RunActive(
        "the conversation has a run that has not finished; resolve or cancel it first",
        extra={"run_id": str(active) if active else None, "pending": [_brief(p) for p in pending]},
    )


def _brief(call: PendingCall) -> dict[str, Any]:
    """A pending call as an error body may carry it: the summary, never the full arguments."""
    return {
        "correlation_id": str(call.correlation_id),
        "kind": call.kind.value,
        "tool_name": call.tool_name,
        "args_summary": call.args_summary,
        "effect_description": call.effect_description,
        "status": call.status.value,
        "expires_at": call.expires_at.isoformat(),
    }
