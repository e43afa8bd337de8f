"""Approval requests from agents Sursis does not host: file, wait, consume once, report.

A request passes the same policy point as a hosted call and becomes a pending call of a
conversation and run of its own (a run that never re-queues: its `awaiting_count` is zero), so
it is decided by the same resolve and its compare-and-set. What a hosted call gets from the
dispatch check (only the approved arguments run, once) an agent outside gets from `consume`: the
approval is handed over once, to the key that filed it, against the digest the deciders saw.
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sursis.domain.access import Permission
from sursis.domain.approvals.approval_request_records import (
    AlreadyConsumed,
    AlreadyReported,
    ApprovalExpired,
    ApprovalRequest,
    ApprovalUnitOfWork,
    ApprovalUnitOfWorkFactory,
    DigestMismatch,
    ExternalCallPolicy,
    FiledApproval,
    Filing,
    IdempotencyKeyReused,
    InvalidDigest,
    NotApproved,
    NotConsumed,
    NotRequester,
    Outcome,
    PendingWatcher,
)
from sursis.domain.approvals.approval_votes import with_approval
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import NotFound, ValidationFailed
from sursis.domain.events.events import EventType, pending_created_data, publish
from sursis.domain.policy.policies import authorization_of, unavailable
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.records import AuditEntry, Conversation, PendingCall, Principal, Run
from sursis.domain.reviews.reviewer_steps import queue_reviews
from sursis.domain.sanitize import args_hash, sanitize
from sursis.domain.states import PendingStatus, RunStatus
from sursis.domain.tools import Category, Executor, PendingKind, ToolSpec

FILED = "approval.requested"
CONSUMED = "approval.consumed"
REPORTED = "approval.outcome"
"""Audit actions of the outside half; the decision between them is the pending call's own row."""


@dataclass
class ApprovalRequestService:
    """File requests through the policy point, let their agent wait, consume and report."""

    uow: ApprovalUnitOfWorkFactory
    policy: ExternalCallPolicy
    watcher: PendingWatcher
    _: KW_ONLY
    clock: Clock = utcnow
    max_wait_seconds: float = 60.0
    max_expiry: timedelta = field(default=timedelta(days=7))

    async def file(self, principal: Principal, filing: Filing) -> FiledApproval:
        """The request's pending call, asked, allowed or denied by the policy point; a filing under
        an idempotency key already used returns that request (`created` False)."""
        principal.require(Permission.CONVERSE)
        workspace = filing.workspace or principal.workspace or "default"
        if not principal.can_see(workspace):
            raise NotFound("workspace not found")
        digest = args_hash(filing.tool_name, filing.args)
        if filing.digest is not None and filing.digest != digest:
            raise InvalidDigest(
                "the digest is not the one of this tool and these arguments",
                extra={"errors": [{"loc": ["digest"], "msg": "does not match tool_name and args"}]},
            )
        if filing.expires_in > self.max_expiry:
            raise ValidationFailed(
                "the expiry is too far away",
                extra={"errors": [{"loc": ["expires_in"], "msg": f"at most {self.max_expiry}"}]},
            )
        if filing.idempotency_key is not None:
            earlier = await self._earlier(principal, workspace, filing.idempotency_key, digest)
            if earlier is not None:
                return earlier
        decision = await self._decide(workspace, filing, principal)
        now = self.clock()
        request = ApprovalRequest(
            correlation_id=uuid.uuid4(),
            workspace=workspace,
            filed_by=principal.id,
            digest=digest,
            created_at=now,
            expires_at=now + filing.expires_in,
            idempotency_key=filing.idempotency_key,
            conversation=filing.conversation,
        )
        async with self.uow() as uow:
            claimed = await uow.approval_requests.claim(request)
            if claimed:
                await _store_call(uow, principal, request, filing, decision, now)
                await uow.commit()
        if not claimed:  # another filing under the key committed first (read after this rollback)
            assert filing.idempotency_key is not None
            raced = await self._earlier(principal, workspace, filing.idempotency_key, digest)
            assert raced is not None
            return raced
        stored = await self._read(principal, request.correlation_id)  # with its route's view
        return FiledApproval(stored.request, stored.call, created=True)

    async def get(self, principal: Principal, correlation_id: uuid.UUID, wait: float = 0) -> FiledApproval:
        """The request; with `wait`, once it is decided or `wait` seconds passed (a long-poll)."""
        principal.require(Permission.CONVERSE)
        deadline = asyncio.get_running_loop().time() + min(max(wait, 0), self.max_wait_seconds)
        while True:
            found = await self._read(principal, correlation_id)
            left = deadline - asyncio.get_running_loop().time()
            if found.call.status is not PendingStatus.AWAITING or left <= 0:
                return found
            # Woken by a decision in this process; one made elsewhere is seen by polling.
            with self.watcher.watch_pending(found.request.workspace) as event, suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(left, 1.0))

    async def abandoned(self, principal: Principal, limit: int = 50) -> list[FiledApproval]:
        """The requests whose agent took an approval (or was given one) and never said what became of
        it before the expiry: the caller's workspace's (every workspace's for an admin)."""
        principal.require(Permission.CONVERSE)
        now = self.clock()
        async with self.uow.reader() as uow:
            workspace = None if principal.is_admin else principal.workspace
            ids = await uow.approval_requests.abandoned(workspace, now, limit)
            return [await _visible(uow, principal, cid, now) for cid in ids]

    async def consume(self, principal: Principal, correlation_id: uuid.UUID, digest: str) -> FiledApproval:
        """Hand the approval over, once: to the key that filed it, presenting the approved digest,
        before the request expires. Every refusal says why and changes nothing."""
        principal.require(Permission.CONVERSE)
        now = self.clock()
        async with self.uow() as uow:
            found = await _visible(uow, principal, correlation_id, now)
            request, call = found.request, found.call
            _require_filer(principal, request)
            if call.status is not PendingStatus.APPROVED:
                raise NotApproved(
                    f"the request is {found.state(now)}, not approved: the action must not run",
                    extra={"state": found.state(now)},
                )
            approved = args_hash(call.tool_name, found.approved_args())
            if digest != approved:
                raise DigestMismatch(
                    "the digest is not the one the deciders approved", extra={"digest": approved}
                )
            if request.consumed_at is not None:
                raise AlreadyConsumed(
                    "the approval was consumed already: it is single-use",
                    extra={"consumed_at": request.consumed_at.isoformat()},
                )
            if request.expires_at <= now:
                raise ApprovalExpired(
                    "the request expired before its approval was consumed",
                    extra={"expires_at": request.expires_at.isoformat()},
                )
            if not await uow.approval_requests.consume(correlation_id, digest, principal.id, now):
                raise AlreadyConsumed("the approval was consumed already: it is single-use")
            await uow.audit.append(AuditEntry.of_call(CONSUMED, principal.id, call, {"digest": digest}), now)
            await uow.commit()
        consumed = ApprovalRequest(**{**_fields(request), "consumed_at": now, "consumed_by": principal.id})
        return FiledApproval(consumed, call)

    async def report(
        self, principal: Principal, correlation_id: uuid.UUID, outcome: Outcome, detail: str | None
    ) -> FiledApproval:
        """The outcome of a consumed approval (ran, failed, not run), once: it closes the trail."""
        principal.require(Permission.CONVERSE)
        now = self.clock()
        async with self.uow() as uow:
            found = await _visible(uow, principal, correlation_id, now)
            _require_filer(principal, found.request)
            if found.request.consumed_at is None:
                raise NotConsumed("only a consumed approval has an outcome to report")
            if found.request.outcome is not None or not await uow.approval_requests.report(
                correlation_id, outcome, now
            ):
                raise AlreadyReported("the outcome was reported already")
            details = {"outcome": outcome.value, "detail": detail}
            await uow.audit.append(AuditEntry.of_call(REPORTED, principal.id, found.call, details), now)
            await uow.commit()
        reported = ApprovalRequest(**{**_fields(found.request), "outcome": outcome, "reported_at": now})
        return FiledApproval(reported, found.call)

    async def _earlier(
        self, principal: Principal, workspace: str, key: str, digest: str
    ) -> FiledApproval | None:
        async with self.uow.reader() as uow:
            request = await uow.approval_requests.by_key(workspace, key)
            if request is None:
                return None
            if request.digest != digest:
                raise IdempotencyKeyReused(
                    "the idempotency key was used for another call",
                    extra={"correlation_id": str(request.correlation_id)},
                )
            return await _visible(uow, principal, request.correlation_id, self.clock())

    async def _read(self, principal: Principal, correlation_id: uuid.UUID) -> FiledApproval:
        async with self.uow.reader() as uow:
            return await _visible(uow, principal, correlation_id, self.clock())

    async def _decide(self, workspace: str, filing: Filing, principal: Principal) -> PolicyDecision:
        try:
            return await self.policy.decide_external(workspace, filing, principal)
        except Exception:  # fail closed, as the tool wrapper does: a point that cannot tell asks
            return unavailable(ToolSpec(filing.tool_name, category=Category.MUTATE))


def _fields(request: ApprovalRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in ApprovalRequest.__dataclass_fields__}


def _require_filer(principal: Principal, request: ApprovalRequest) -> None:
    if principal.id != request.filed_by:
        raise NotRequester("only the key that filed the request may consume it and report its outcome")


async def _visible(
    uow: ApprovalUnitOfWork, principal: Principal, correlation_id: uuid.UUID, now: datetime
) -> FiledApproval:
    """The request and its call if the principal may see its workspace; else `NotFound`."""
    request = await uow.approval_requests.get(correlation_id)
    call = await uow.pending.get(correlation_id) if request is not None else None
    if request is None or call is None or not principal.can_see(request.workspace):
        raise NotFound("approval request not found")
    [call] = await with_approval(uow, principal, [call], now)
    return FiledApproval(request, call)


def _settled_by(decision: PolicyDecision) -> tuple[PendingStatus, str, str] | None:
    """The status, deciding actor and audit action of a call the policy settles at once."""
    authorization = authorization_of(decision)
    if authorization is not None:
        return PendingStatus.APPROVED, f"authorization:{authorization}", "pending.auto_approved"
    actor = f"policy:{decision.rule or 'default'}"
    if decision.effect is PolicyEffect.DENY:
        return PendingStatus.DENIED, actor, "pending.denied"
    if decision.effect in (PolicyEffect.ALLOW, PolicyEffect.NOTIFY):
        return PendingStatus.APPROVED, actor, "pending.approved"
    return None


def _holder(
    principal: Principal, request: ApprovalRequest, filing: Filing, now: datetime
) -> tuple[Conversation, Run]:
    """The conversation and run a request's pending call belongs to. The run waits (`suspended`) on
    no counted call, so no decision re-queues it; it is not the conversation's active run, so the
    conversation is idle and retention purges it (the request with it), and a message posted there
    runs no agent that lives elsewhere (`agent_not_served`)."""
    conversation = Conversation(
        id=uuid.uuid4(),
        workspace=request.workspace,
        agent=filing.agent,
        status="open",
        active_run_id=None,
        created_at=now,
        updated_at=now,
        created_by=principal.id,
    )
    run = Run.queued(
        conversation.id,
        request.workspace,
        filing.agent,
        f"approval request for {filing.tool_name}",
        now,
        started_by=principal.id,
        started_role=principal.role.value,
        stream=False,
    )
    run.status, run.segment = RunStatus.SUSPENDED, 1
    return conversation, run


def _pending_call(
    principal: Principal,
    request: ApprovalRequest,
    filing: Filing,
    decision: PolicyDecision,
    run: Run,
    now: datetime,
) -> PendingCall:
    """The request as a pending call: awaiting, or settled already by the policy point."""
    wait = filing.expires_in
    if decision.route is not None and decision.route.timeout is not None:
        wait = min(wait, decision.route.timeout)
    settled = _settled_by(decision)
    call = PendingCall(
        correlation_id=request.correlation_id,
        conversation_id=run.conversation_id,
        run_id=run.id,
        workspace=request.workspace,
        segment=1,
        tool_call_id=f"approval-{request.correlation_id}",
        tool_name=filing.tool_name,
        agent=filing.agent,
        executor=Executor.SERVER,
        kind=PendingKind.APPROVAL,
        args=filing.args,
        args_summary=sanitize(filing.args),
        args_hash=request.digest,
        effect_description=filing.description or f"Run {filing.tool_name} in agent {filing.agent}",
        status=settled[0] if settled else PendingStatus.AWAITING,
        created_at=now,
        expires_at=now + wait,
        category=Category.MUTATE,
        policy=decision,
        requested_by=principal.id,
    )
    if settled is not None:
        call.resolved_by, call.resolved_at = settled[1], now
        call.reason = decision.reason
        call.resolution = {"decision": "approve" if settled[0] is PendingStatus.APPROVED else "deny"}
    return call


async def _store_call(
    uow: ApprovalUnitOfWork,
    principal: Principal,
    request: ApprovalRequest,
    filing: Filing,
    decision: PolicyDecision,
    now: datetime,
) -> PendingCall:
    """The request's conversation, run and pending call, audited; an asked call is announced (inbox,
    channels, webhooks) and queued for the reviewer its route names."""
    conversation, run = _holder(principal, request, filing, now)
    call = _pending_call(principal, request, filing, decision, run, now)
    await uow.conversations.add(conversation)
    await uow.runs.add(run)
    await uow.pending.add(call)
    details = {
        "kind": call.kind,
        "agent": filing.agent,
        "conversation": filing.conversation,
        "idempotency_key": filing.idempotency_key,
        "digest": request.digest,
        "policy": decision.to_json(),
    }
    await uow.audit.append(AuditEntry.of_call(FILED, principal.id, call, details), now)
    settled = _settled_by(decision)
    if settled is not None:
        await uow.audit.append(AuditEntry.of_call(settled[2], settled[1], call, {"reason": call.reason}), now)
        return call
    await queue_reviews(uow, [call], now)
    await publish(
        uow, conversation.id, request.workspace, EventType.PENDING_CREATED, pending_created_data(call), now
    )
    return call
