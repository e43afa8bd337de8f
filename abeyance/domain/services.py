"""Use cases. Each runs in one unit of work and commits once; they speak only to ports."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from abeyance.domain import run_lifecycle
from abeyance.domain.access import Permission, permission_to_resolve
from abeyance.domain.errors import ArgsChanged, NotFound, Stale, ValidationFailed
from abeyance.domain.events import (
    EventType,
    publish,
    publish_pending_resolved,
    run_status_data,
)
from abeyance.domain.ports import RunNotifier, ServiceMetrics, ToolCatalog, UnitOfWork, UnitOfWorkFactory
from abeyance.domain.records import (
    AuditEntry,
    Conversation,
    PendingCall,
    Principal,
    Run,
    StoredMessage,
    ToolCallMetadata,
    ToolCallRecord,
)
from abeyance.domain.run_queue import check_content, queue_message
from abeyance.domain.sanitize import args_hash as compute_args_hash
from abeyance.domain.states import Decision, PendingStatus, RunStatus, decide
from abeyance.domain.tools import PendingKind

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Resolution:
    """What an operator or user decided about one pending call."""

    decision: Decision
    reason: str | None = None
    args: dict[str, Any] | None = None
    result: Any = None
    args_hash: str | None = None


@dataclass(slots=True)
class RunView:
    run: Run
    pending: list[PendingCall]


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Filters of the audit log (`actions`: any of them); rows come in id order, or newest first,
    and `after_id` is the keyset cursor: the id of the last row of the previous page."""

    conversation_id: uuid.UUID | None = None
    correlation_id: uuid.UUID | None = None
    actions: tuple[str, ...] = ()
    since: datetime | None = None
    after_id: int | None = None
    limit: int = 50
    newest_first: bool = False


class NoMetrics:
    """`ServiceMetrics` that records nothing."""

    def run_status(self, status: RunStatus) -> None:
        return None

    def pending_resolved(self, call: PendingCall, status: PendingStatus, at: datetime) -> None:
        return None

    def tool_call(self, metadata: ToolCallMetadata) -> None:
        return None


class AgentService:
    """Conversations, messages, runs and pending calls, as HTTP clients and operators use them."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        catalog: ToolCatalog,
        notifier: RunNotifier,
        *,
        clock: Clock = utcnow,
        max_content_chars: int = 32_000,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self._uow = uow
        self._catalog = catalog
        self._notifier = notifier
        self._clock = clock
        self._max_content_chars = max_content_chars
        self._metrics: ServiceMetrics = metrics or NoMetrics()

    async def create_conversation(
        self, principal: Principal, agent: str, workspace: str | None
    ) -> Conversation:
        if agent not in self._catalog.agent_names():
            raise ValidationFailed(
                f"unknown agent {agent!r}", extra={"errors": [{"loc": ["agent"], "msg": "unknown agent"}]}
            )
        ws = workspace or principal.workspace or "default"
        if not principal.can_see(ws):
            raise NotFound("workspace not found")
        principal.require(Permission.CONVERSE)
        now = self._clock()
        conversation = Conversation(
            id=uuid.uuid4(),
            workspace=ws,
            agent=agent,
            status="open",
            active_run_id=None,
            created_at=now,
            updated_at=now,
            created_by=principal.id,
        )
        async with self._uow() as uow:
            await uow.conversations.add(conversation)
            await uow.commit()
        return conversation

    async def get_conversation(self, principal: Principal, conversation_id: uuid.UUID) -> Conversation:
        async with self._uow() as uow:
            return await self._visible_conversation(uow, principal, conversation_id)

    async def conversation_detail(
        self, principal: Principal, conversation_id: uuid.UUID
    ) -> tuple[Conversation, list[StoredMessage], RunView | None]:
        async with self._uow() as uow:
            conversation = await self._visible_conversation(uow, principal, conversation_id)
            messages = await uow.messages.read(conversation_id)
            active = None
            if conversation.active_run_id is not None:
                run = await uow.runs.get(conversation.active_run_id)
                if run is not None:
                    pending = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
                    active = RunView(run=run, pending=pending)
            return conversation, messages, active

    async def post_message(
        self, principal: Principal, conversation_id: uuid.UUID, content: str, channel: str = "web"
    ) -> Run:
        """Write the user message's run as `queued`; the worker turns it into messages."""
        check_content(content, self._max_content_chars)
        now = self._clock()
        async with self._uow() as uow:
            conversation = await self._visible_conversation(uow, principal, conversation_id)
            run = await queue_message(uow, principal.id, conversation, content, now, channel)
            await uow.commit()
        self._metrics.run_status(RunStatus.QUEUED)
        await self._notifier.run_queued(run.id)
        return run

    async def get_run(self, principal: Principal, run_id: uuid.UUID) -> RunView:
        async with self._uow() as uow:
            run = await uow.runs.get(run_id)
            if run is None or not principal.can_see(run.workspace):
                raise NotFound("run not found")
            principal.require(Permission.CONVERSE)
            pending = await uow.pending.for_run(run.id, PendingStatus.AWAITING) if run.awaiting_count else []
            return RunView(run=run, pending=pending)

    async def list_tool_calls(self, principal: Principal, run_id: uuid.UUID) -> list[ToolCallRecord]:
        async with self._uow() as uow:
            run = await uow.runs.get(run_id)
            if run is None or not principal.can_see(run.workspace):
                raise NotFound("run not found")
            principal.require(Permission.CONVERSE)
            return await uow.tool_calls.for_run(run_id)

    async def cancel_run(self, principal: Principal, run_id: uuid.UUID) -> RunView:
        """Cancel a run: awaiting calls become `cancelled` (the model is told on the next turn)."""
        now = self._clock()
        cancelled: list[PendingCall] = []
        async with self._uow() as uow:
            run = await uow.runs.get(run_id)
            if run is None or not principal.can_see(run.workspace):
                raise NotFound("run not found")
            principal.require(Permission.CONVERSE)
            if run.status.finished:
                raise Stale(f"the run is already {run.status.value}", extra={"run_status": run.status.value})
            if run.status is RunStatus.RUNNING:
                await run_lifecycle.request_cancel(uow, run, principal.id, now)
            else:
                ended = await run_lifecycle.cancel_idle(uow, run, principal.id, now)
                if ended is None:
                    raise Stale("the run changed while it was being cancelled")
                cancelled = ended
            await uow.commit()
        for call in cancelled:
            self._metrics.pending_resolved(call, PendingStatus.CANCELLED, now)
        if run.status is not RunStatus.RUNNING:
            self._metrics.run_status(RunStatus.CANCELLED)
        await self._notifier.run_changed(run_id)
        return await self.get_run(principal, run_id)

    async def get_pending(self, principal: Principal, correlation_id: uuid.UUID) -> PendingCall:
        async with self._uow() as uow:
            call = await uow.pending.get(correlation_id)
            if call is None or not principal.can_see(call.workspace):
                raise NotFound("pending call not found")
            principal.require(Permission.CONVERSE)
            return call

    async def list_pending(
        self,
        principal: Principal,
        *,
        status: PendingStatus | None,
        kind: PendingKind | None,
        tool_name: str | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[PendingCall]:
        principal.require(Permission.CONVERSE)
        async with self._uow() as uow:
            return await uow.pending.search(
                workspace=None if principal.is_admin else principal.workspace,
                status=status,
                kind=kind,
                tool_name=tool_name,
                after=after,
                limit=limit,
            )

    async def resolve_pending(
        self, principal: Principal, correlation_id: uuid.UUID, resolution: Resolution
    ) -> PendingCall:
        """Commit one decision. Exactly one of racing resolvers wins; the others get `Stale`.

        Answered as soon as the decision is committed: the resume happens in a worker.
        """
        now = self._clock()
        async with self._uow() as uow:
            call = await uow.pending.get(correlation_id)
            if call is None or not principal.can_see(call.workspace):
                raise NotFound("pending call not found")
            principal.require(permission_to_resolve(call.kind))
            await _require_may_answer(uow, principal, call)
            if call.status is not PendingStatus.AWAITING:
                raise await _stale(uow, call)
            if call.expires_at <= now:
                raise await self._expire_late(uow, call, now)
            target = decide(call.kind, resolution.decision)
            if resolution.args_hash is not None and resolution.args_hash != call.args_hash:
                raise ArgsChanged(
                    "the call's arguments are not the ones you reviewed", extra={"args_hash": call.args_hash}
                )
            record: dict[str, Any] = {"decision": resolution.decision.value}
            details: dict[str, Any] = {}
            if resolution.decision is Decision.APPROVE and resolution.args is not None:
                edited = self._catalog.validate_args(call.agent, call.tool_name, resolution.args)
                if edited != call.args:
                    record["args"] = edited
                    details = {"edited_args": edited, "args_hash": compute_args_hash(call.tool_name, edited)}
            if resolution.decision is Decision.ANSWER:
                record["result"] = self._catalog.validate_result(
                    call.agent, call.tool_name, resolution.result
                )
            if not await uow.pending.transition(
                correlation_id,
                target,
                now,
                resolved_by=principal.id,
                reason=resolution.reason,
                resolution=record,
                before_expiry=True,
            ):
                fresh = await uow.pending.get(correlation_id) or call
                if fresh.status is PendingStatus.AWAITING:
                    raise await self._expire_late(uow, fresh, now)
                raise await _stale(uow, fresh)
            await uow.audit.append(
                AuditEntry.of_call(
                    _AUDIT_ACTIONS[target], principal.id, call, {"reason": resolution.reason, **details}
                ),
                now,
            )
            requeued = await uow.runs.resolve_one_awaiting(call.run_id, now)
            await _publish_resolution(uow, call, target, principal.id, requeued, now)
            await uow.commit()
        # What the conditional update wrote: no second read of the row.
        resolved = replace(
            call,
            status=target,
            resolved_by=principal.id,
            reason=resolution.reason,
            resolution=record,
            resolved_at=now,
        )
        self._metrics.pending_resolved(call, target, now)
        if requeued:
            self._metrics.run_status(RunStatus.QUEUED)
            await self._notifier.run_queued(call.run_id)
        return resolved

    async def _expire_late(self, uow: UnitOfWork, call: PendingCall, now: datetime) -> Stale:
        """A decision that came after `expires_at`: the call expires here, as the sweeper would
        have expired it (the run resumes and the model is told), and the decision is `Stale`."""
        expiry = await expire_overdue_call(uow, call, now)
        if expiry is None:
            return await _stale(uow, await uow.pending.get(call.correlation_id) or call)
        await _publish_resolution(uow, call, PendingStatus.EXPIRED, EXPIRY_ACTOR, expiry.run_requeued, now)
        await uow.commit()
        self._metrics.pending_resolved(call, PendingStatus.EXPIRED, now)
        if expiry.run_requeued:
            self._metrics.run_status(RunStatus.QUEUED)
            await self._notifier.run_queued(call.run_id)
        return Stale(
            f"the pending call expired at {call.expires_at.isoformat()} before a decision; "
            "the action was not performed",
            extra={
                "pending_status": PendingStatus.EXPIRED.value,
                "resolved_by": EXPIRY_ACTOR,
                "resolved_by_name": None,
                "resolved_at": now.isoformat(),
                "expires_at": call.expires_at.isoformat(),
            },
        )

    async def list_audit(self, principal: Principal, query: AuditQuery) -> list[AuditEntry]:
        """Audit rows in the order they were written (or newest first): the caller's workspace, or
        all for an admin. Rows whose actor is an API key carry the key's name."""
        principal.require(Permission.READ_AUDIT)
        if not principal.is_admin and principal.workspace is None:
            return []
        async with self._uow() as uow:
            rows = await uow.audit.search(
                workspace=None if principal.is_admin else principal.workspace,
                conversation_id=query.conversation_id,
                correlation_id=query.correlation_id,
                actions=query.actions,
                since=query.since,
                after_id=query.after_id,
                limit=query.limit,
                newest_first=query.newest_first,
            )
            names = await actor_names(uow, {row.actor for row in rows})
        for row in rows:
            row.actor_name = names.get(row.actor)
        return rows

    async def _visible_conversation(
        self, uow: Any, principal: Principal, conversation_id: uuid.UUID
    ) -> Conversation:
        conversation: Conversation | None = await uow.conversations.get(conversation_id)
        if conversation is None or not principal.can_see(conversation.workspace):
            raise NotFound("conversation not found")
        principal.require(Permission.CONVERSE)
        return conversation


EXPIRY_ACTOR = "system:sweeper"
"""Who expires an overdue call: nobody decided in time (found by the sweeper or by a late resolve)."""


@dataclass(frozen=True, slots=True)
class Expiry:
    """An overdue call moved to `expired`, and whether that re-queued its run."""

    call: PendingCall
    run_requeued: bool


async def expire_overdue_call(uow: UnitOfWork, call: PendingCall, now: datetime) -> Expiry | None:
    """Expire an awaiting call in the caller's transaction; None if it was no longer awaiting.

    The same conditional write as a decision, the `pending.expired` audit row, and one awaiting
    call counted down on the run, which is re-queued when it was the last. The caller publishes
    the events: they come last in its transaction (their per-conversation lock is the last lock).
    """
    if not await uow.pending.transition(
        call.correlation_id,
        PendingStatus.EXPIRED,
        now,
        resolved_by=EXPIRY_ACTOR,
        reason="no decision before expires_at",
        resolution={"decision": "expire"},
    ):
        return None
    await uow.audit.append(AuditEntry.of_call("pending.expired", EXPIRY_ACTOR, call, {}), now)
    return Expiry(call, await uow.runs.resolve_one_awaiting(call.run_id, now))


_AUDIT_ACTIONS = {
    PendingStatus.APPROVED: "pending.approved",
    PendingStatus.DENIED: "pending.denied",
    PendingStatus.REVISION_REQUESTED: "pending.revision_requested",
    PendingStatus.ANSWERED: "pending.answered",
    PendingStatus.EXPIRED: "pending.expired",
    PendingStatus.CANCELLED: "pending.cancelled",
}


async def actor_names(uow: UnitOfWork, actors: Iterable[str | None]) -> dict[str, str]:
    """The names of the actors that are API keys (by key id). The other actors (`cli`, `system:*`,
    `authorization:<id>`) are not keys and are left out: they name themselves."""
    by_id: dict[uuid.UUID, str] = {}
    for actor in actors:
        try:
            by_id[uuid.UUID(actor or "")] = actor or ""
        except ValueError:
            continue
    names = await uow.api_keys.names(list(by_id))
    return {by_id[key_id]: name for key_id, name in names.items()}


async def _publish_resolution(
    uow: UnitOfWork, call: PendingCall, status: PendingStatus, actor: str, requeued: bool, now: datetime
) -> None:
    """`pending.resolved`, and `run.status` queued when the resolution re-queued the run."""
    await publish_pending_resolved(uow, call, status.value, actor, now)
    if requeued:
        await publish(
            uow,
            call.conversation_id,
            call.workspace,
            EventType.RUN_STATUS,
            run_status_data(call.run_id, RunStatus.QUEUED.value),
            now,
        )


async def _require_may_answer(uow: UnitOfWork, principal: Principal, call: PendingCall) -> None:
    """Answers (elicitation, client execution) belong to the conversation's creator; whoever may
    answer any conversation's calls (operators, admins) skips the lookup."""
    if call.kind is PendingKind.APPROVAL or principal.may(Permission.ANSWER_ANY):
        return
    conversation = await uow.conversations.get(call.conversation_id)
    principal.require_may_answer(conversation.created_by if conversation else None)


async def _stale(uow: UnitOfWork, call: PendingCall) -> Stale:
    """The loser's answer says who decided and when, so a person can tell what happened."""
    names = await actor_names(uow, [call.resolved_by])
    return Stale(
        f"the pending call is already {call.status.value}",
        extra={
            "pending_status": call.status.value,
            "resolved_by": call.resolved_by,
            "resolved_by_name": names.get(call.resolved_by or ""),
            "resolved_at": call.resolved_at.isoformat() if call.resolved_at else None,
        },
    )
