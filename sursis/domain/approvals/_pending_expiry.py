"""An overdue pending call's expiry: nobody decided in time (found by the sweeper or by a late
resolve); its route may say a timeout denies it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sursis.domain.policy_decisions import TimeoutOutcome
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, PendingCall
from sursis.domain.states import PendingStatus
from sursis.domain.tools import PendingKind

EXPIRY_ACTOR = "system:sweeper"
"""Who expires an overdue call: nobody decided in time (found by the sweeper or by a late resolve)."""


@dataclass(frozen=True, slots=True)
class Expiry:
    """An overdue call moved to `expired` (or `denied`, when its route says a timeout denies), and
    whether that re-queued its run."""

    call: PendingCall
    run_requeued: bool
    status: PendingStatus = PendingStatus.EXPIRED


TIMEOUT_DECISION = "timeout"
"""The stored decision of a call its route denied because nobody decided in time: no person denied it."""


def timeout_denies(call: PendingCall) -> bool:
    """Whether the call's route denies it (rather than letting it expire) when nobody decided in time."""
    route = call.policy.route if call.policy is not None else None
    return call.kind is PendingKind.APPROVAL and route is not None and route.on_timeout is TimeoutOutcome.DENY


async def expire_overdue_call(uow: UnitOfWork, call: PendingCall, now: datetime) -> Expiry | None:
    """Expire an awaiting call in the caller's transaction; None if it was no longer awaiting.

    The same conditional write as a decision, the `pending.expired` audit row (`pending.timed_out`
    when its route denies on timeout), and one awaiting call counted down on the run, which is
    re-queued when it was the last. The caller publishes the events: they come last in its
    transaction (their per-conversation lock is the last lock).
    """
    deny = timeout_denies(call)
    status = PendingStatus.DENIED if deny else PendingStatus.EXPIRED
    if not await uow.pending.transition(
        call.correlation_id,
        status,
        now,
        resolved_by=EXPIRY_ACTOR,
        reason="nobody decided before expires_at" if deny else "no decision before expires_at",
        resolution={"decision": TIMEOUT_DECISION, "on_timeout": "deny"} if deny else {"decision": "expire"},
    ):
        return None
    action = "pending.timed_out" if deny else "pending.expired"
    await uow.audit.append(AuditEntry.of_call(action, EXPIRY_ACTOR, call, {}), now)
    return Expiry(call, await uow.runs.resolve_one_awaiting(call.run_id, now), status)
