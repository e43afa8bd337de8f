"""Forking a conversation: a new conversation of the same workspace with the original's history up
to a turn, its legal holds, an audit row naming who forked and where, and the fork's first run."""

from __future__ import annotations

import uuid
from dataclasses import KW_ONLY, dataclass, field, replace
from itertools import groupby
from operator import itemgetter

from sursis.domain.access import Permission
from sursis.domain.agents.agent_ports import RunNotifier
from sursis.domain.clock import Clock, utcnow
from sursis.domain.conversations._fork import ForkPlan, plan_fork
from sursis.domain.conversations.conversations import visible_conversation
from sursis.domain.errors import Forbidden
from sursis.domain.ports import NoMetrics, ServiceMetrics
from sursis.domain.records import AuditEntry, Conversation, Principal, Run
from sursis.domain.retention.retention_ports import RetentionUnitOfWork, RetentionUnitOfWorkFactory
from sursis.domain.retention.retention_records import LegalHold
from sursis.domain.runs.run_queue import check_content, queue_or_hand_off
from sursis.domain.states import RunStatus


@dataclass(frozen=True, slots=True)
class Forked:
    """The new conversation and the run of its first user message."""

    conversation: Conversation
    run: Run


def require_may_fork(principal: Principal, conversation: Conversation) -> None:
    """`Forbidden` unless the caller may fork `conversation` (one it can see): any of them with
    `fork_any`, else only one the same key created. A conversation without an owner is nobody's own."""
    if principal.may(Permission.FORK_ANY):
        return
    if conversation.created_by is not None and conversation.created_by == principal.id:
        return
    raise Forbidden(
        "only the key that created the conversation, an operator or an admin may fork it",
        extra={"required": Permission.FORK_ANY.value},
    )


@dataclass
class ForkService:
    """Fork a conversation at one of its turns (`fork.py` says what is copied)."""

    uow: RetentionUnitOfWorkFactory
    notifier: RunNotifier
    _: KW_ONLY
    clock: Clock = utcnow
    max_content_chars: int = 32_000
    metrics: ServiceMetrics = field(default_factory=NoMetrics)

    async def fork(
        self,
        principal: Principal,
        conversation_id: uuid.UUID,
        at: int,
        message: str | None = None,
        channel: str = "web",
    ) -> Forked:
        """Write the fork, its copied history, its holds, its audit row and its queued run in one
        transaction; the run then runs like any other (every tool call through the policy point)."""
        if message is not None:
            check_content(message, self.max_content_chars)
        now = self.clock()
        async with self.uow() as uow:
            original = await visible_conversation(uow, principal, conversation_id)
            require_may_fork(principal, original)
            plan = plan_fork(await uow.messages.read(original.id), at, message)
            check_content(plan.prompt, self.max_content_chars)
            fork = replace(
                Conversation.open(original.workspace, original.agent, principal.id, now),
                forked_from_id=original.id,
                forked_from_seq=at,
            )
            await uow.conversations.add(fork)
            await self._copy(uow, fork, plan, original)
            details = {
                "forked_from": str(original.id),
                "at": at,
                "copied_messages": len(plan.copied),
                "message_replaced": plan.replaced,
            }
            await uow.audit.append(
                AuditEntry("conversation.forked", principal.id, fork.workspace, fork.id, details=details), now
            )
            run, _ = await queue_or_hand_off(
                uow, principal.id, fork, plan.prompt, now, channel, principal.role.value
            )
            await uow.commit()
        self.metrics.run_status(RunStatus.QUEUED)
        await self.notifier.run_queued(run.id)
        return Forked(fork, run)

    async def _copy(
        self, uow: RetentionUnitOfWork, fork: Conversation, plan: ForkPlan, original: Conversation
    ) -> None:
        """The copied messages (sealed anew for the fork's rows: a ciphertext is bound to its row)
        and the original's own legal holds (a workspace's holds cover the fork already)."""
        now = fork.created_at
        last = 0
        for channel, run in groupby(plan.copied, key=itemgetter(1)):
            bodies = [body for body, _ in run]
            last = await uow.messages.append(fork.id, None, bodies, now, channel, after_seq=last)
        for hold in await uow.retention.holds(original.workspace):
            if hold.conversation_id != original.id:
                continue
            copy = LegalHold(uuid.uuid4(), fork.workspace, fork.id, hold.reason, hold.created_by, now)
            await uow.retention.add_hold(copy)
            details = {"hold_id": str(copy.id), "reason": hold.reason, "copied_from": str(hold.id)}
            actor = fork.created_by or ""
            entry = AuditEntry("retention.hold_placed", actor, fork.workspace, fork.id, details=details)
            await uow.audit.append(entry, now)
