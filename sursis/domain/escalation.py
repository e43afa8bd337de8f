"""The sweeper's part in approval routing: remind once, then escalate step by step.

A routed call's route row names when its next reminder or escalation is due (`due_at`). Each
sweeper pass takes the due ones of awaiting calls, records what it did (conditional on the `due_at`
it read, so two sweepers never remind or escalate twice), and tells people: a `pending.reminded`
or `pending.escalated` event and audit row in the same transaction; an escalation's groups may vote
from then on, and its Slack channels and email addresses hear of the call through the channel
outbox (`escalation_notices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sursis.domain import approvers as a
from sursis.domain.channels.escalation import notify_target
from sursis.domain.events import EventType, publish
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, PendingCall
from sursis.domain.states import PendingStatus

ROUTING_ACTOR = "system:sweeper"


@dataclass(frozen=True, slots=True)
class Advanced:
    call: PendingCall
    step: a.RouteStep


async def advance_routes(uow: UnitOfWork, now: datetime, limit: int) -> list[Advanced]:
    """Remind and escalate the routed calls due at `now` (at most `limit`), in the caller's
    transaction; what was done, for logging."""
    done: list[Advanced] = []
    for state in await uow.approvers.due_routes(now, limit):
        call = await uow.pending.get(state.correlation_id)
        route = a.routed(call.policy) if call is not None else None
        if call is None or route is None or call.status is not PendingStatus.AWAITING:
            continue
        step = a.step(route, call.created_at, state, now)
        if not step.remind and not step.reached:
            step = a.RouteStep(False, step.level, (), None)  # nothing was due after all: stop looking
        if not await uow.approvers.advance(state, step, now):
            continue  # another sweeper took it
        if step.remind:
            await _remind(uow, call, state, now)
        for offset, to in enumerate(step.reached):
            level = state.escalation_level + offset + 1
            await _escalate(uow, call, level, to, now)
        if step.remind or step.reached:
            done.append(Advanced(call, step))
    return done


async def _remind(uow: UnitOfWork, call: PendingCall, state: a.RouteState, now: datetime) -> None:
    await uow.audit.append(AuditEntry.of_call("pending.reminded", ROUTING_ACTOR, call, {}), now)
    route = a.routed(call.policy)
    assert route is not None
    await publish(
        uow,
        call.conversation_id,
        call.workspace,
        EventType.PENDING_REMINDED,
        {
            "correlation_id": str(call.correlation_id),
            "tool_name": call.tool_name,
            "approvers": list(a.targets(route, state)),
            "expires_at": call.expires_at.isoformat(),
        },
        now,
    )


async def _escalate(
    uow: UnitOfWork, call: PendingCall, level: int, to: tuple[str, ...], now: datetime
) -> None:
    reached = await escalation_notices(uow, call, to, now)
    details = {"level": level, "to": list(to), "unreachable": reached.unreachable}
    await uow.audit.append(AuditEntry.of_call("pending.escalated", ROUTING_ACTOR, call, details), now)
    await publish(
        uow,
        call.conversation_id,
        call.workspace,
        EventType.PENDING_ESCALATED,
        {
            "correlation_id": str(call.correlation_id),
            "tool_name": call.tool_name,
            "level": level,
            "to": list(to),
            "expires_at": call.expires_at.isoformat(),
        },
        now,
    )


@dataclass(frozen=True, slots=True)
class Notices:
    unreachable: list[str]


async def escalation_notices(
    uow: UnitOfWork, call: PendingCall, to: tuple[str, ...], now: datetime
) -> Notices:
    """Put the call before an escalation's Slack channels and email addresses (groups need nothing:
    their members may vote from now on). A target that cannot be reached is named in the audit row."""
    unreachable: list[str] = []
    for target in to:
        if target.startswith(a.GROUP_PREFIX) or target.startswith(a.KEY_PREFIX):
            continue
        if not await notify_target(uow, call, target, now):
            unreachable.append(target)
    return Notices(unreachable)
