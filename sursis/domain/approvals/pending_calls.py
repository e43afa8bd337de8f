"""Pending calls as operators and users decide them: read, list, resolve (their expiry:
`_pending_expiry`)."""

from __future__ import annotations

import uuid
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime
from typing import Any

from sursis.domain.access import Permission, permission_to_resolve
from sursis.domain.agents.agent_ports import RunNotifier, ToolCatalog
from sursis.domain.approvals._decision_checks import (
    publish_resolution,
    require_may_answer,
    stale_answer,
    visible_call,
    vote_counted,
)
from sursis.domain.approvals._pending_expiry import EXPIRY_ACTOR as EXPIRY_ACTOR
from sursis.domain.approvals._pending_expiry import TIMEOUT_DECISION as TIMEOUT_DECISION
from sursis.domain.approvals._pending_expiry import expire_overdue_call as expire_overdue_call
from sursis.domain.approvals._pending_expiry import timeout_denies
from sursis.domain.approvals.approval_votes import Ballot, cast, own_approval, record_vote, with_approval
from sursis.domain.approvals.decision_seal import SELF_APPROVAL, VOTES
from sursis.domain.approvers import routed
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import ArgsChanged, Stale
from sursis.domain.hand_off import RunHandOff, SegmentStartRead, SlotLease
from sursis.domain.paging import Page
from sursis.domain.ports import (
    HeldConditionFailed,
    LeaseAhead,
    NoMetrics,
    SeenDecision,
    ServiceMetrics,
    UnitOfWork,
    UnitOfWorkFactory,
)
from sursis.domain.records import AuditEntry, PendingCall, Principal, Run
from sursis.domain.sanitize import args_hash as compute_args_hash
from sursis.domain.states import Decision, PendingStatus, RunStatus, decide
from sursis.domain.tools import PendingKind

PendingCursor = tuple[datetime, uuid.UUID]
"""Where a page of pending calls ends: the last call's `created_at` and correlation id."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """What an operator or user decided about one pending call."""

    decision: Decision
    reason: str | None = None
    args: dict[str, Any] | None = None
    result: Any = None
    args_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Decided:
    """A committed decision: the call as decided, and whether the decision queued its run again
    (the run's last awaiting call was decided, so the run resumes)."""

    call: PendingCall
    run_queued: bool


@dataclass
class _Handing:
    """A decision's hand-off: the reserved slot, and the run it leased with what it starts from;
    whether the committed decision queued the run."""

    lease: SlotLease | None
    run: Run | None = None
    start: SegmentStartRead | None = None
    requeued: bool = False


@dataclass
class PendingCallService:
    """Read, list and decide pending calls. Exactly one of racing deciders wins."""

    uow: UnitOfWorkFactory
    catalog: ToolCatalog
    notifier: RunNotifier
    _: KW_ONLY
    clock: Clock = utcnow
    metrics: ServiceMetrics = field(default_factory=NoMetrics)
    hand_off: RunHandOff | None = None
    """This process's worker slots: a decision that re-queues its run leases it to a free one."""

    async def get_pending(self, principal: Principal, correlation_id: uuid.UUID) -> PendingCall:
        async with self.uow.reader() as uow:
            call = await visible_call(uow, principal, correlation_id)
            principal.require(Permission.CONVERSE)
            return (await with_approval(uow, principal, [call], self.clock()))[0]

    async def list_pending(
        self,
        principal: Principal,
        *,
        status: PendingStatus | None,
        kind: PendingKind | None,
        tool_name: str | None,
        after: PendingCursor | None,
        limit: int,
    ) -> Page[PendingCall, PendingCursor]:
        """One page of the caller's pending calls (every workspace's for an admin), newest first."""
        principal.require(Permission.CONVERSE)
        async with self.uow.reader() as uow:
            rows = await uow.pending.search(
                workspace=None if principal.is_admin else principal.workspace,
                status=status,
                kind=kind,
                tool_name=tool_name,
                after=after,
                limit=limit + 1,
            )
            rows = await with_approval(uow, principal, rows, self.clock())
        return Page.of(rows, limit, _cursor)

    async def resolve_pending(
        self, principal: Principal, correlation_id: uuid.UUID, resolution: Resolution
    ) -> PendingCall:
        """Commit one decision. Exactly one of racing resolvers wins; the others get `Stale`.

        Answered as soon as the decision is committed: the resume happens in a worker (a free slot
        of this process's worker when there is one: `hand_off.py`).
        """
        return (await self.decide_pending(principal, correlation_id, resolution)).call

    async def decide_pending(
        self, principal: Principal, correlation_id: uuid.UUID, resolution: Resolution
    ) -> Decided:
        """`resolve_pending`, also telling whether the decision queued the call's run again."""
        handing = _Handing(self.hand_off.reserve() if self.hand_off is not None else None)
        try:
            seen = await self._seen(correlation_id, handing)
            try:
                resolved = await self._resolve(principal, correlation_id, resolution, handing, seen)
            except HeldConditionFailed:
                if seen is None:
                    raise
                # The run changed since it was read (another decision, a cancel): the one statement
                # wrote nothing, so the decision is made again in a transaction of its own.
                handing.run = handing.start = None
                resolved = await self._resolve(principal, correlation_id, resolution, handing, None)
        finally:
            # Not handed (no run re-queued, a stale decision, a rolled back transaction): the slot
            # is free again. A lease committed but never handed runs out and is swept.
            if handing.lease is not None and self.hand_off is not None:
                self.hand_off.cancel(handing.lease)
        return Decided(resolved, handing.requeued)

    async def _seen(self, correlation_id: uuid.UUID, handing: _Handing) -> SeenDecision | None:
        """The call read before the decision's transaction, where a slot of this process waits to
        run what it resumes: with its run awaiting it alone, the decision, the run's lease and their
        audit rows and events may then be that transaction's one statement (`pending.decide`)."""
        if handing.lease is None or self.hand_off is None:
            return None
        async with self.uow.reader() as reader:
            return await reader.pending.seen_for_decision(correlation_id, self.hand_off.log_positions())

    async def _resolve(
        self,
        principal: Principal,
        correlation_id: uuid.UUID,
        resolution: Resolution,
        handing: _Handing,
        seen: SeenDecision | None,
    ) -> PendingCall:
        now = self.clock()
        async with self.uow() as uow:
            call, target = await self._open_call(uow, principal, correlation_id, resolution, now, seen)
            route = routed(call.policy) if call.kind is PendingKind.APPROVAL else None
            self_approved = False
            approving = resolution.decision is Decision.APPROVE
            if route is None and call.kind is PendingKind.APPROVAL and approving:
                self_approved = await own_approval(uow, principal, call)
            ballot: Ballot | None = None
            if route is not None:
                ballot = await cast(
                    uow, principal, call, route, resolution.decision, resolution.reason, resolution.args, now
                )
                if not ballot.decides:
                    return await vote_counted(uow, principal, call, ballot, route.quorum, now)
            record, details = self._checked(call, resolution)
            if ballot is not None and ballot.vote.on_behalf_of is not None:
                record["on_behalf_of"] = ballot.vote.on_behalf_of
                details["on_behalf_of"] = ballot.vote.on_behalf_of
            if self_approved or (ballot is not None and ballot.self_approval):
                details["self_approval"] = True
                record[SELF_APPROVAL] = True
            if ballot is not None:
                record[VOTES] = ballot.sealed_votes()
            requeued = await self._decided(
                uow,
                principal,
                call,
                target,
                resolution,
                record,
                now,
                handing,
                seen if ballot is None else None,
            )
            handing.requeued = requeued
            approval = None
            if route is not None and ballot is not None:
                await record_vote(uow, call, ballot, route.quorum, now)
                approval = (await with_approval(uow, principal, [call], now))[0].approval
            await uow.audit.append(
                AuditEntry.of_call(
                    _AUDIT_ACTIONS[target], principal.id, call, {"reason": resolution.reason, **details}
                ),
                now,
            )
            await publish_resolution(uow, call, target, principal.id, requeued, now)
            if handing.run is not None and self.hand_off is not None:
                await self.hand_off.record_start(uow, handing.run, now)
            await uow.commit()
        # What the conditional update wrote: no second read of the row.
        resolved = replace(
            call,
            status=target,
            resolved_by=principal.id,
            reason=resolution.reason,
            resolution=record,
            resolved_at=now,
            approval=approval,
        )
        await self._after_commit(call, target, requeued, now, handing)
        return resolved

    async def _open_call(
        self,
        uow: UnitOfWork,
        principal: Principal,
        correlation_id: uuid.UUID,
        resolution: Resolution,
        now: datetime,
        seen: SeenDecision | None = None,
    ) -> tuple[PendingCall, PendingStatus]:
        """The call the principal may decide now (as `seen` read it, else read here), and the status
        the decision gives it; a call decided already is `Stale`, one past its expiry is expired here."""
        call = await visible_call(uow, principal, correlation_id, seen)
        principal.require(permission_to_resolve(call.kind))
        await require_may_answer(uow, principal, call)
        if call.status is not PendingStatus.AWAITING:
            raise await stale_answer(uow, call)
        if call.expires_at <= now:
            raise await self._expire_late(uow, call, now)
        target = decide(call.kind, resolution.decision)
        if resolution.args_hash is not None and resolution.args_hash != call.args_hash:
            raise ArgsChanged(
                "the call's arguments are not the ones you reviewed", extra={"args_hash": call.args_hash}
            )
        return call, target

    async def _decided(
        self,
        uow: UnitOfWork,
        principal: Principal,
        call: PendingCall,
        target: PendingStatus,
        resolution: Resolution,
        record: dict[str, Any],
        now: datetime,
        handing: _Handing,
        seen: SeenDecision | None = None,
    ) -> bool:
        """The conditional update of the call; True when it re-queued the run (then leased to the
        reserved slot). One that lost a race is `Stale` (or expired here, past its expiry)."""
        lease = None
        if handing.lease is not None and self.hand_off is not None:
            log_after = self.hand_off.log_position(call.conversation_id)
            lease = LeaseAhead(handing.lease.owner, handing.lease.until, log_after)
        requeued = await uow.pending.decide(
            call,
            target,
            now,
            resolved_by=principal.id,
            reason=resolution.reason,
            resolution=record,
            lease=lease,
            seen=seen,
        )
        if requeued is None:
            fresh = await uow.pending.get(call.correlation_id) or call
            if fresh.status is PendingStatus.AWAITING:
                raise await self._expire_late(uow, fresh, now)
            raise await stale_answer(uow, fresh)
        if requeued:
            await self._lease(uow, call, now, handing)
        return requeued

    async def _lease(self, uow: UnitOfWork, call: PendingCall, now: datetime, handing: _Handing) -> None:
        """The re-queued run leased to the reserved slot, and what its segment starts from read, in
        the decision's transaction (before anything is held back for its commit)."""
        if handing.lease is None or self.hand_off is None:
            return
        run = await uow.runs.lease(
            call.run_id,
            handing.lease.owner,
            now,
            handing.lease.until,
            log_after=self.hand_off.log_position(call.conversation_id),
        )
        if run is not None:
            handing.start = await self.hand_off.read_start(uow, run)
            handing.run = run

    def _checked(self, call: PendingCall, resolution: Resolution) -> tuple[dict[str, Any], dict[str, Any]]:
        """The resolution as stored (edited args and answers validated against the tool's
        declaration), and the audit row's details."""
        record: dict[str, Any] = {"decision": resolution.decision.value}
        details: dict[str, Any] = {}
        if resolution.decision is Decision.APPROVE and resolution.args is not None:
            edited = self.catalog.validate_args(call.agent, call.tool_name, resolution.args)
            if edited != call.args:
                record["args"] = edited
                details = {"edited_args": edited, "args_hash": compute_args_hash(call.tool_name, edited)}
        if resolution.decision is Decision.ANSWER:
            record["result"] = self.catalog.validate_result(call.agent, call.tool_name, resolution.result)
        return record, details

    async def _expire_late(self, uow: UnitOfWork, call: PendingCall, now: datetime) -> Stale:
        """A decision that came after `expires_at`: the call expires here, as the sweeper would
        have expired it (the run resumes and the model is told), and the decision is `Stale`."""
        expiry = await expire_overdue_call(uow, call, now)
        if expiry is None:
            return await stale_answer(uow, await uow.pending.get(call.correlation_id) or call)
        await publish_resolution(uow, call, expiry.status, EXPIRY_ACTOR, expiry.run_requeued, now)
        await uow.commit()
        await self._after_commit(call, expiry.status, expiry.run_requeued, now)
        outcome = "was denied by its route (nobody decided)" if timeout_denies(call) else "expired"
        return Stale(
            f"the pending call {outcome} at {call.expires_at.isoformat()} before a decision; "
            "the action was not performed",
            extra={
                "pending_status": expiry.status.value,
                "resolved_by": EXPIRY_ACTOR,
                "resolved_by_name": None,
                "resolved_at": now.isoformat(),
                "expires_at": call.expires_at.isoformat(),
            },
        )

    async def _after_commit(
        self,
        call: PendingCall,
        status: PendingStatus,
        requeued: bool,
        now: datetime,
        handing: _Handing | None = None,
    ) -> None:
        self.metrics.pending_resolved(call, status, now)
        if requeued:
            self.metrics.run_status(RunStatus.QUEUED)
            lease, run = (handing.lease, handing.run) if handing is not None else (None, None)
            if lease is not None and run is not None and handing is not None and self.hand_off is not None:
                self.hand_off.hand(lease, run, handing.start)
                handing.lease = None  # handed: the slot is the run's now
            else:
                await self.notifier.run_queued(call.run_id)


_AUDIT_ACTIONS = {
    PendingStatus.APPROVED: "pending.approved",
    PendingStatus.DENIED: "pending.denied",
    PendingStatus.REVISION_REQUESTED: "pending.revision_requested",
    PendingStatus.ANSWERED: "pending.answered",
    PendingStatus.EXPIRED: "pending.expired",
    PendingStatus.CANCELLED: "pending.cancelled",
}


def _cursor(call: PendingCall) -> PendingCursor:
    return call.created_at, call.correlation_id
