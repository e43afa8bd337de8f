"""A run's end of life, in one place: suspended on pending calls, completed, failed or cancelled.

Each transition writes, in the caller's transaction, the run's new status, its audit rows, the
conversation freed when the run ends, and the events that tell of it. Events come last: their
per-conversation lock is the last lock the transaction takes. The runner (a worker's segment)
and the services (a person cancelling) end runs through these functions only; the caller
commits, and counts metrics after the commit.

The functions for a run a worker holds take its lease `owner` and return False, having written
nothing of their own, when the lease is no longer that owner's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sursis.domain.events.events import (
    EventType,
    pending_created_data,
    publish,
    publish_pending_resolved,
    publish_run_status,
    run_status_data,
)
from sursis.domain.policy.policy_sampling import SAMPLED_ACTION, was_sampled
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, JsonText, PendingCall, Run, RunError, Usage
from sursis.domain.reviews.reviewer_steps import queue_reviews
from sursis.domain.states import PendingStatus, RunStatus

ToolEvents = Sequence[tuple[EventType, dict[str, Any]]]
"""`tool.call` / `tool.result` events for the messages stored in the same transaction."""


async def suspend(
    uow: UnitOfWork,
    run: Run,
    owner: str,
    calls: Sequence[PendingCall],
    usage: Usage,
    now: datetime,
    *,
    actor: str,
    tool_events: ToolEvents = (),
    trace_context: dict[str, str] | None = None,
    unless_cancel_requested: bool = False,
) -> bool:
    """The run waits on `calls`: stored, audited and announced; the conversation stays taken.

    `trace_context` is what the segment that resumes the run continues. With
    `unless_cancel_requested`, a run asked to cancel is not suspended either (False).
    """
    if not await uow.runs.finish(
        run.id,
        owner,
        RunStatus.SUSPENDED,
        now,
        usage=usage,
        awaiting_count=len(calls),
        trace_context=trace_context,
        unless_cancel_requested=unless_cancel_requested,
    ):
        return False
    for call in calls:
        await uow.pending.add(call)
        await uow.audit.append(AuditEntry.of_call("pending.requested", actor, call, {"kind": call.kind}), now)
        if call.policy is not None and was_sampled(call.policy):
            details = {"rule": call.policy.rule, "one_in": call.policy.sample_one_in}
            await uow.audit.append(AuditEntry.of_call(SAMPLED_ACTION, actor, call, details), now)
    await uow.audit.append(AuditEntry.of_run("run.suspended", actor, run, {"pending": len(calls)}), now)
    await queue_reviews(uow, calls, now)
    await _publish_all(uow, run, tool_events, now)
    for call in calls:
        await publish(
            uow,
            run.conversation_id,
            run.workspace,
            EventType.PENDING_CREATED,
            pending_created_data(call),
            now,
        )
    await publish_run_status(uow, run, RunStatus.SUSPENDED.value, now)
    return True


async def complete(
    uow: UnitOfWork,
    run: Run,
    owner: str,
    usage: Usage,
    output: str | None,
    now: datetime,
    *,
    actor: str,
    tool_events: ToolEvents = (),
    unless_cancel_requested: bool = False,
) -> bool:
    """The agent answered: the run is completed with its output (with `unless_cancel_requested`,
    unless a cancel was requested: False, nothing written)."""
    return await _end(
        uow,
        run,
        owner,
        RunStatus.COMPLETED,
        usage,
        now,
        actor=actor,
        output=output,
        tool_events=tool_events,
        unless_cancel_requested=unless_cancel_requested,
    )


async def fail(
    uow: UnitOfWork,
    run: Run,
    owner: str,
    usage: Usage,
    error: RunError,
    now: datetime,
    *,
    actor: str,
    tool_events: ToolEvents = (),
) -> bool:
    """The run cannot go on: failed with `error`; the conversation stays usable."""
    return await _end(
        uow, run, owner, RunStatus.FAILED, usage, now, actor=actor, error=error, tool_events=tool_events
    )


async def cancel(
    uow: UnitOfWork,
    run: Run,
    owner: str,
    usage: Usage,
    now: datetime,
    *,
    actor: str,
    tool_events: ToolEvents = (),
    details: dict[str, Any] | None = None,
) -> bool:
    """A worker's run stops at a persistence point because a cancel was requested."""
    return await _end(
        uow,
        run,
        owner,
        RunStatus.CANCELLED,
        usage,
        now,
        actor=actor,
        details=details,
        tool_events=tool_events,
    )


async def _end(
    uow: UnitOfWork,
    run: Run,
    owner: str,
    status: RunStatus,
    usage: Usage,
    now: datetime,
    *,
    actor: str,
    output: str | None = None,
    error: RunError | None = None,
    details: dict[str, Any] | None = None,
    tool_events: ToolEvents = (),
    unless_cancel_requested: bool = False,
) -> bool:
    """What every end of a worker's run writes: the final status, the audit row, the
    conversation freed, the tool events and the closing event."""
    if not await uow.runs.finish(
        run.id,
        owner,
        status,
        now,
        usage=usage,
        output=output,
        error=error,
        unless_cancel_requested=unless_cancel_requested,
    ):
        return False
    audited = {"error": error.code} if error else (details or {})
    await uow.audit.append(AuditEntry.of_run(f"run.{status.value}", actor, run, audited), now)
    await uow.conversations.release_active_run(run.conversation_id, run.id, now)
    await _publish_all(uow, run, tool_events, now)
    event_type, data = _closing_event(run, status, usage, output, error)
    await publish(uow, run.conversation_id, run.workspace, event_type, data, now)
    return True


async def cancel_idle(uow: UnitOfWork, run: Run, actor: str, now: datetime) -> list[PendingCall] | None:
    """Cancel a queued or suspended run, which no worker holds: its awaiting calls become
    `cancelled` (the model is told on the next turn) and the conversation is freed.

    Returns the calls cancelled, or None when the run was no longer queued or suspended.
    """
    if not await uow.runs.transition(
        run.id, [RunStatus.QUEUED, RunStatus.SUSPENDED], RunStatus.CANCELLED, now, finished_at=now
    ):
        return None
    cancelled: list[PendingCall] = []
    for call in await uow.pending.for_run(run.id, PendingStatus.AWAITING):
        if await uow.pending.transition(
            call.correlation_id,
            PendingStatus.CANCELLED,
            now,
            resolved_by=actor,
            reason="run cancelled",
            resolution={"decision": "cancel"},
        ):
            await uow.audit.append(AuditEntry.of_call("pending.cancelled", actor, call, {}), now)
            cancelled.append(call)
    await uow.conversations.release_active_run(run.conversation_id, run.id, now)
    for call in cancelled:
        await publish_pending_resolved(uow, call, PendingStatus.CANCELLED.value, actor, now)
    await publish_run_status(uow, run, RunStatus.CANCELLED.value, now)
    await uow.audit.append(AuditEntry.of_run("run.cancelled", actor, run), now)
    return cancelled


async def request_cancel(uow: UnitOfWork, run: Run, actor: str, now: datetime) -> None:
    """Ask the worker running `run` to stop: it ends the run as cancelled at its next
    persistence point (`cancel` above)."""
    await uow.runs.transition(run.id, [RunStatus.RUNNING], RunStatus.RUNNING, now, cancel_requested=True)
    await uow.audit.append(AuditEntry.of_run("run.cancel_requested", actor, run), now)


async def _publish_all(uow: UnitOfWork, run: Run, events: ToolEvents, now: datetime) -> None:
    for event_type, data in events:
        await publish(uow, run.conversation_id, run.workspace, event_type, data, now)


def _closing_event(
    run: Run, status: RunStatus, usage: Usage, output: str | None, error: RunError | None
) -> tuple[EventType, dict[str, Any]]:
    if status is RunStatus.COMPLETED:
        shown = json.loads(output) if isinstance(output, JsonText) else output
        return EventType.RUN_COMPLETED, {"run_id": str(run.id), "output": shown, "usage": usage.to_json()}
    if status is RunStatus.FAILED:
        return EventType.RUN_FAILED, {
            "run_id": str(run.id),
            "error": {"code": error.code, "message": error.message} if error else None,
            "usage": usage.to_json(),
        }
    return EventType.RUN_STATUS, run_status_data(run, status.value)
