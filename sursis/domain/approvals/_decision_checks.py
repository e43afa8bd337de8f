"""What a decision checks and writes beside the call's own update: the caller's view of the call,
who may answer it, the loser's `stale` answer, a vote that does not decide yet, and the events of
a resolution."""

from __future__ import annotations

import uuid
from datetime import datetime

from sursis.domain.access import Permission
from sursis.domain.approvals.approval_votes import Ballot, record_vote, with_approval
from sursis.domain.audit.audit import actor_names
from sursis.domain.errors import NotFound, Stale
from sursis.domain.events.events import EventType, publish, publish_pending_resolved, run_status_data
from sursis.domain.ports import SeenDecision, UnitOfWork
from sursis.domain.records import PendingCall, Principal
from sursis.domain.states import PendingStatus, RunStatus
from sursis.domain.tools import PendingKind


async def vote_counted(
    uow: UnitOfWork, principal: Principal, call: PendingCall, ballot: Ballot, quorum: int, now: datetime
) -> PendingCall:
    """A vote that does not decide the call yet: counted and committed; the call stays awaiting."""
    fresh = await uow.pending.get(call.correlation_id) or call
    if fresh.status is not PendingStatus.AWAITING:
        raise await stale_answer(uow, fresh)
    await record_vote(uow, call, ballot, quorum, now)
    counted = (await with_approval(uow, principal, [call], now))[0]
    await uow.commit()
    return counted


async def visible_call(
    uow: UnitOfWork, principal: Principal, correlation_id: uuid.UUID, seen: SeenDecision | None = None
) -> PendingCall:
    """The call (as `seen` read it, else read now), if its workspace is the principal's (or the
    principal is an admin); else `NotFound`."""
    call = seen.call if seen is not None else await uow.pending.get(correlation_id)
    if call is None or not principal.can_see(call.workspace):
        raise NotFound("pending call not found")
    return call


async def publish_resolution(
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


async def require_may_answer(uow: UnitOfWork, principal: Principal, call: PendingCall) -> None:
    """Answers (elicitation, client execution) belong to the conversation's creator; whoever may
    answer any conversation's calls (operators, admins) skips the lookup."""
    if call.kind is PendingKind.APPROVAL or principal.may(Permission.ANSWER_ANY):
        return
    conversation = await uow.conversations.get(call.conversation_id)
    principal.require_may_answer(conversation.created_by if conversation else None)


async def stale_answer(uow: UnitOfWork, call: PendingCall) -> Stale:
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
