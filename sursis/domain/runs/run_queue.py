"""Queueing a run for one message: the message is checked, the conversation claimed, and the run,
its audit row and its `run.status` event written in the caller's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sursis.domain.errors import RunActive, ValidationFailed
from sursis.domain.events.events import publish_run_status
from sursis.domain.hand_off import RunHandOff, SegmentStartRead, SlotLease, leased
from sursis.domain.ports import SeenConversation, UnitOfWork
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


async def queue_or_hand_off(
    uow: UnitOfWork,
    actor: str,
    conversation: Conversation,
    content: str,
    now: datetime,
    channel: str,
    role: str | None = None,
    hand_off: tuple[RunHandOff, SlotLease] | None = None,
    stream: bool | None = None,
    seen: SeenConversation | None = None,
) -> tuple[Run, SegmentStartRead | None]:
    """The queued run of `content`, or `RunActive` (nothing written) while another run holds the
    conversation. `actor` (with its `role`) is recorded as the run's starter. With `hand_off` (a
    reserved slot of this process) the run is written leased to that slot, as its claim would leave
    it, with the claim's audit row and event, and what its first segment starts from is read in the
    same transaction (`hand_off.py`). `stream` None: the run streams if it came from `web`. `seen`:
    the conversation as a read before this transaction saw it; the claim may then be held to the
    commit, which raises `HeldConditionFailed` if the row changed since (`claim_active_run`)."""
    run = Run.queued(
        conversation.id,
        conversation.workspace,
        conversation.agent,
        content,
        now,
        channel=channel,
        started_by=actor,
        started_role=role,
        stream=stream,
    )
    log_after = hand_off[0].log_position(conversation.id) if hand_off is not None else None
    claimed = await uow.conversations.claim_active_run(
        conversation.id, run.id, now, log_after=log_after, seen=seen
    )
    if not claimed:
        fresh = await uow.conversations.get(conversation.id)
        active = fresh.active_run_id if fresh else None
        pending = await uow.pending.for_run(active, PendingStatus.AWAITING) if active else []
        raise RunActive(
            "the conversation has a run that has not finished; resolve or cancel it first",
            extra={"run_id": str(active) if active else None, "pending": [brief(p) for p in pending]},
        )
    start = None
    if hand_off is not None:
        slots, lease = hand_off
        queued = run
        run = leased(run, lease, now)
        start = await slots.read_start(uow, run)  # a read: before any write is held back
        await uow.runs.add(run)
        await _record_queued(uow, actor, queued, now, channel)
        await slots.record_start(uow, run, now)
        return run, start
    await uow.runs.add(run)
    await _record_queued(uow, actor, run, now, channel)
    return run, None


async def _record_queued(uow: UnitOfWork, actor: str, run: Run, now: datetime, channel: str) -> None:
    details = {} if channel == "web" else {"channel": channel}
    await uow.audit.append(AuditEntry.of_run("run.queued", actor, run, details), now)
    await publish_run_status(uow, run, RunStatus.QUEUED.value, now)


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
