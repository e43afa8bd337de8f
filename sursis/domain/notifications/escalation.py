"""The sweeper's part in approval routing: remind, then escalate step by step.

A routed call's route row (or that of any call whose route names `reminders`) names when its next
reminder or escalation is due (`due_at`). Each sweeper pass takes the due ones of awaiting calls,
records what it did (conditional on the `due_at`, level and reminders sent it read, so two sweepers
never remind or escalate twice), and tells people: a `pending.reminded` or `pending.escalated`
event and audit row in the same transaction; an escalation's groups may vote from then on, and its
Slack channels and email addresses hear of the call through the channel outbox
(`escalation_notices`). A reminder before the deadline (a fraction of it, `fraction` in its audit
row and event) reaches every channel the call was posted to: the event is fanned out to the
conversation's Slack threads and email digests, and to webhooks subscribed to `pending.reminded`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sursis.domain import approvers as a
from sursis.domain.channels.escalation import notify_target
from sursis.domain.events.events import EventType, publish
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
        route = a.swept(call.policy) if call is not None else None
        if call is None or route is None or call.status is not PendingStatus.AWAITING:
            continue
        step = a.step(route, call.created_at, state, now, call.expires_at)
        acted = step.remind or bool(step.reached) or step.reminder is not None
        if not acted:
            # Nothing was due after all: stop looking.
            step = a.RouteStep(False, step.level, (), None, reminders_sent=step.reminders_sent)
        if not await uow.approvers.advance(state, step, now):
            continue  # another sweeper took it
        if step.remind:
            await _remind(uow, call, state, now)
        if step.reminder is not None:
            await _remind(uow, call, state, now, step.reminder, step.passed)
        for offset, to in enumerate(step.reached):
            level = state.escalation_level + offset + 1
            await _escalate(uow, call, level, to, now)
        if acted:
            done.append(Advanced(call, step))
    return done


async def _remind(
    uow: UnitOfWork,
    call: PendingCall,
    state: a.RouteState,
    now: datetime,
    fraction: float | None = None,
    passed: tuple[float, ...] = (),
) -> None:
    """A reminder: the route's one `remind_after` (no `fraction`), or the deadline reminder at
    `fraction` (`passed`: earlier fractions a late sweeper reached at the same time)."""
    details: dict[str, object] = {}
    if fraction is not None:
        details = {"fraction": fraction, "passed": list(passed)}
    await uow.audit.append(AuditEntry.of_call("pending.reminded", ROUTING_ACTOR, call, details), now)
    route = a.swept(call.policy)
    assert route is not None
    await publish(
        uow,
        call.conversation_id,
        call.workspace,
        EventType.PENDING_REMINDED,
        {
            "run_id": str(call.run_id),
            "correlation_id": str(call.correlation_id),
            "tool_name": call.tool_name,
            "kind": call.kind.value,
            "effect_description": call.effect_description,
            "approvers": list(a.targets(route, state)),
            "expires_at": call.expires_at.isoformat(),
            **details,
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
