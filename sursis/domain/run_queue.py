"""Queueing a run for one message: the message is checked, the conversation claimed, and the run,
its audit row and its `run.status` event written in the caller's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sursis.domain.errors import RunActive, ValidationFailed
from sursis.domain.events import publish_run_status
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, Conversation, PendingCall, Run
from sursis.domain.states import PendingStatus, RunStatus


def check_content(content: str, max_chars: int) -> None:
    """`ValidationFailed` for an empty message or one longer than `max_chars`."""
    if not content.strip():
        raise ValidationFailed("content is empty", extra={"errors": [{"loc": ["content"], "msg": "empty"}]})
    if len(content) > max_chars:
        raise ValidationFailed(
            f"content is longer than {max_chars} characters",
            extra={"errors": [{"loc": ["content"], "msg": "too long"}]},
        )


async def queue_message(
    uow: UnitOfWork,
    actor: str,
    conversation: Conversation,
    content: str,
    now: datetime,
    channel: str,
    role: str | None = None,
) -> Run:
    """The queued run of `content`, or `RunActive` (nothing written) while another run holds the
    conversation. `actor` (with its `role`) is recorded as the run's starter."""
    run = Run.queued(
        conversation.id,
        conversation.workspace,
        conversation.agent,
        content,
        now,
        channel=channel,
        started_by=actor,
        started_role=role,
    )
    if not await uow.conversations.claim_active_run(conversation.id, run.id, now):
        fresh = await uow.conversations.get(conversation.id)
        active = fresh.active_run_id if fresh else None
        pending = await uow.pending.for_run(active, PendingStatus.AWAITING) if active else []
        raise RunActive(
            "the conversation has a run that has not finished; resolve or cancel it first",
            extra={"run_id": str(active) if active else None, "pending": [brief(p) for p in pending]},
        )
    await uow.runs.add(run)
    details = {} if channel == "web" else {"channel": channel}
    await uow.audit.append(AuditEntry.of_run("run.queued", actor, run, details), now)
    await publish_run_status(uow, run, RunStatus.QUEUED.value, now)
    return run


def brief(call: PendingCall) -> dict[str, Any]:
    """A pending call as an error body may carry it: the summary, never the full arguments."""
    return {
        "correlation_id": str(call.correlation_id),
        "kind": call.kind.value,
        "tool_name": call.tool_name,
        "args_summary": call.args_summary,
        "effect_description": call.effect_description,
        "status": call.status.value,
        "expires_at": call.expires_at.isoformat(),
    }
