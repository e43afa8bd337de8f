"""Conversations as their users hold them: start one, read it, post a message (which queues a run)."""

from __future__ import annotations

import uuid
from dataclasses import KW_ONLY, dataclass, field

from sursis.domain.access import Permission
from sursis.domain.agents.agent_ports import RunNotifier, ToolCatalog
from sursis.domain.approvals.approval_votes import with_approval
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import NotFound, ValidationFailed
from sursis.domain.hand_off import RunHandOff, SegmentStartRead
from sursis.domain.ports import (
    HeldConditionFailed,
    NoMetrics,
    SeenConversation,
    ServiceMetrics,
    UnitOfWork,
    UnitOfWorkFactory,
)
from sursis.domain.records import Conversation, Principal, Run, StoredMessage
from sursis.domain.retention.retention import raise_if_purged
from sursis.domain.runs.run_queue import check_content, queue_or_hand_off
from sursis.domain.runs.runs import RunView
from sursis.domain.states import PendingStatus, RunStatus


@dataclass(frozen=True, slots=True)
class ConversationDetail:
    """A conversation, its message log and its active run (with that run's awaiting calls)."""

    conversation: Conversation
    messages: list[StoredMessage]
    active_run: RunView | None
    forks: list[Conversation] = field(default_factory=list)
    """The conversations forked from this one (those the caller can see), oldest first."""


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
    hand_off: RunHandOff | None = None
    """This process's worker slots: a message's run is leased to a free one in the same transaction."""

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

    async def open_thread(self, principal: Principal, agent: str, thread: uuid.UUID) -> Conversation:
        """The conversation of an outside front end's thread (AG-UI `threadId`), opened on first use
        in the caller's workspace. Two first uses racing: the loser reads the winner's."""
        async with self.uow.reader() as uow:
            found = await uow.conversations.get(thread)
        if found is None:
            if agent not in self.catalog.agent_names():
                raise NotFound(f"unknown agent {agent!r}")
            ws = principal.workspace or "default"
            principal.require(Permission.CONVERSE)
            try:
                async with self.uow() as uow:
                    await uow.conversations.add(
                        Conversation.open(ws, agent, principal.id, self.clock(), thread)
                    )
                    await uow.commit()
            except Exception:
                async with self.uow.reader() as uow:
                    if await uow.conversations.get(thread) is None:
                        raise
        conversation = await self.get_conversation(principal, thread)
        if conversation.agent != agent:
            raise NotFound("conversation not found")
        return conversation

    async def get_conversation(self, principal: Principal, conversation_id: uuid.UUID) -> Conversation:
        async with self.uow.reader() as uow:
            return await visible_conversation(uow, principal, conversation_id)

    async def conversation_detail(
        self, principal: Principal, conversation_id: uuid.UUID
    ) -> ConversationDetail:
        async with self.uow.reader() as uow:
            conversation = await visible_conversation(uow, principal, conversation_id)
            messages = await uow.messages.read(conversation_id)
            active = None
            if conversation.active_run_id is not None:
                run = await uow.runs.get(conversation.active_run_id)
                if run is not None:
                    pending = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
                    pending = await with_approval(uow, principal, pending, self.clock())
                    active = RunView(run=run, pending=pending)
            forks = [
                f for f in await uow.conversations.forks(conversation_id) if principal.can_see(f.workspace)
            ]
            return ConversationDetail(conversation, messages, active, forks)

    async def post_message(
        self,
        principal: Principal,
        conversation_id: uuid.UUID,
        content: str,
        channel: str = "web",
        *,
        stream: bool | None = None,
    ) -> Run:
        """Write the user message's run as `queued` (or leased to a free worker slot of this
        process: `hand_off.py`); the worker turns it into messages. `stream=False`: its model is
        asked for whole responses, each one's text published as one delta (None: a `web` run
        streams, others do not)."""
        check_content(content, self.max_content_chars)
        now = self.clock()
        lease = self.hand_off.reserve() if self.hand_off is not None else None
        hand_off = None if lease is None or self.hand_off is None else (self.hand_off, lease)
        try:
            log_after = hand_off[0].log_position(conversation_id) if hand_off is not None else None
            async with self.uow.reader() as reader:
                read = await _visible_seen(reader, principal, conversation_id, log_after)

            async def queue(seen: SeenConversation | None) -> tuple[Run, SegmentStartRead | None]:
                async with self.uow() as uow:
                    queued = await queue_or_hand_off(
                        uow,
                        principal.id,
                        conversation,
                        content,
                        now,
                        channel,
                        role=principal.role.value,
                        hand_off=hand_off,
                        stream=stream,
                        seen=seen,
                    )
                    await uow.commit()
                return queued

            conversation = read.conversation
            try:
                # A free conversation is claimed by the transaction's one statement, held to its
                # commit, as long as its row is still the one read (the log read with it current).
                run, start = await queue(read if conversation.active_run_id is None else None)
            except HeldConditionFailed:
                run, start = await queue(None)  # changed since: claimed in a transaction of its own
        except BaseException:
            if lease is not None and self.hand_off is not None:
                self.hand_off.cancel(lease)
            raise
        self.metrics.run_status(RunStatus.QUEUED)
        if lease is not None and self.hand_off is not None:
            self.hand_off.hand(lease, run, start)
        else:
            await self.notifier.run_queued(run.id)
        return run


async def _visible_seen(
    uow: UnitOfWork, principal: Principal, conversation_id: uuid.UUID, log_after: int | None
) -> SeenConversation:
    """`visible_conversation`, as a claim in a later transaction may require it unchanged."""
    seen = await uow.conversations.seen(conversation_id, log_after)
    await _visible(uow, principal, conversation_id, seen.conversation if seen is not None else None)
    assert seen is not None  # `_visible` raised otherwise
    return seen


async def visible_conversation(
    uow: UnitOfWork, principal: Principal, conversation_id: uuid.UUID
) -> Conversation:
    """The conversation, if the principal may converse in its workspace; `NotFound` otherwise."""
    return await _visible(uow, principal, conversation_id, await uow.conversations.get(conversation_id))


async def _visible(
    uow: UnitOfWork, principal: Principal, conversation_id: uuid.UUID, conversation: Conversation | None
) -> Conversation:
    if conversation is None:
        await raise_if_purged(uow, principal, conversation_id)
    if conversation is None or not principal.can_see(conversation.workspace):
        raise NotFound("conversation not found")
    principal.require(Permission.CONVERSE)
    return conversation
