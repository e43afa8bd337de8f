"""From a conversation's events to its bindings, in the transaction that wrote the event.

Slack bindings get an outbox row per notice (retried with backoff by the Slack deliverer); a
workspace's Slack channel gets, for each conversation the service starts, a binding of its own
whose thread the announcement opens; email bindings get a digest item (sent in the binding's next
digest). Either is written with the
event or not at all, so a crash never loses a notice nor writes it twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sursis.domain.records.channel_records import (
    SLACK_TOPIC,
    BindingKind,
    ChannelBinding,
    DigestItem,
    DigestItemKind,
    SlackAddress,
)
from sursis.domain.records.event_records import Outgoing, StoredEvent

if TYPE_CHECKING:
    from sursis.domain.ports import UnitOfWork

SLACK_EVENT_TYPES = frozenset(
    {
        "pending.created",
        "pending.reviewed",
        "pending.reminded",
        "pending.resolved",
        "run.completed",
        "run.failed",
    }
)
"""What a Slack thread is told: approvals (posted, reminded of, updated with a reviewer's verdict and
when decided) and the run's end."""
EMAIL_EVENT_TYPES = frozenset(
    {"pending.created", "pending.reviewed", "pending.reminded", "run.failed", "conversation.started"}
)
"""What an email digest lists: approvals waiting (and reminders of them), runs that failed,
conversations the service started."""
CHANNEL_EVENT_TYPES = SLACK_EVENT_TYPES | EMAIL_EVENT_TYPES


async def fan_out(uow: UnitOfWork, event: StoredEvent, bindings: Sequence[ChannelBinding]) -> None:
    """Queue what each of `bindings` (the event's conversation's, from `bindings_for`) should hear of it."""
    if event.type not in CHANNEL_EVENT_TYPES or held_for_the_reviewer(event):
        return
    items: list[DigestItem] = []
    for binding in bindings:
        if binding.kind is BindingKind.SLACK and binding.conversation_id is None:
            if event.type == "conversation.started" and binding.slack is not None:
                thread = await _open_thread(uow, binding, event)
                await _enqueue_slack(uow, thread, event)
        elif binding.kind is BindingKind.SLACK and event.type in SLACK_EVENT_TYPES:
            await _enqueue_slack(uow, binding, event)
        elif binding.kind is BindingKind.EMAIL and (item := digest_item(binding, event)) is not None:
            items.append(item)
    await uow.channels.add_digest_items(items)


def held_for_the_reviewer(event: StoredEvent) -> bool:
    """A call whose route names a reviewer is told to people once the reviewer left it to them
    (`pending.reviewed` with `left_to_people`): a call its reviewer approved never pings anyone."""
    if event.type == "pending.created":
        return bool(event.data.get("reviewer"))
    if event.type == "pending.reviewed":
        return not event.data.get("left_to_people")
    return False


async def _enqueue_slack(uow: UnitOfWork, binding: ChannelBinding, event: StoredEvent) -> None:
    await enqueue_slack_notice(uow, binding, event.envelope(), event.created_at)


async def enqueue_slack_notice(
    uow: UnitOfWork,
    binding: ChannelBinding,
    envelope: dict[str, Any],
    now: datetime,
    **flags: bool,
) -> None:
    """An outbox row for the Slack deliverer: `envelope` (an event's JSON form) posted to `binding`
    (with the deliverer's `flags`, e.g. `escalation.OPENS_THREAD`)."""
    payload = {"binding_id": str(binding.id), "event": envelope, **flags}
    await uow.outbox.enqueue(Outgoing(binding.workspace, SLACK_TOPIC, payload, binding.conversation_id), now)


async def _open_thread(uow: UnitOfWork, channel: ChannelBinding, event: StoredEvent) -> ChannelBinding:
    """The conversation's own binding in a workspace's Slack channel; its thread starts when the
    announcement is posted (the deliverer records the `ts`), so later notices follow it there."""
    assert channel.slack is not None
    slack = SlackAddress(channel.slack.team_id, channel.slack.channel_id, None)
    thread = ChannelBinding.new(
        event.workspace, event.conversation_id, channel.created_by, event.created_at, slack=slack
    )
    await uow.channels.add_binding(thread)
    return thread


def digest_item(binding: ChannelBinding, event: StoredEvent) -> DigestItem | None:
    """The digest line an event makes, if it makes one."""
    data: dict[str, Any] = event.data
    match event.type:
        case "pending.created" if data.get("kind") == "approval":
            kind = DigestItemKind.APPROVAL_WAITING
            summary = f"Approval waiting: {data.get('tool_name')} — {data.get('effect_description')}"
        case "pending.created":
            kind = DigestItemKind.APPROVAL_WAITING
            summary = f"Answer waiting: {data.get('tool_name')} ({data.get('kind')})"
        case "pending.reviewed":
            kind = DigestItemKind.APPROVAL_WAITING
            summary = (
                f"Approval waiting: {data.get('tool_name')} — {data.get('effect_description')} "
                f"(reviewer {data.get('model')}: {data.get('verdict')})"
            )
        case "pending.reminded":
            kind = DigestItemKind.APPROVAL_WAITING
            fraction = data.get("fraction")
            gone = f", {round(float(fraction) * 100)}% of its time passed" if fraction is not None else ""
            summary = (
                f"Reminder: approval still waiting: {data.get('tool_name')} — "
                f"{data.get('effect_description')}{gone}; expires {data.get('expires_at')}"
            )
        case "run.failed":
            error = data.get("error") or {}
            kind = DigestItemKind.RUN_FAILED
            summary = f"Run failed: {error.get('code', 'error')}: {error.get('message', '')}".strip()
        case "conversation.started":
            source = data.get("event") or {}
            kind = DigestItemKind.CONVERSATION_STARTED
            summary = (
                f"Conversation started by the service ({data.get('agent')}) "
                f"after {source.get('type', 'an event')} {source.get('id', '')}".strip()
            )
        case _:
            return None
    return DigestItem(
        binding_id=binding.id,
        conversation_id=event.conversation_id,
        kind=kind,
        summary=summary[:500],
        created_at=event.created_at,
        data={"event_id": event.id, "type": event.type, **_refs(data)},
    )


def _refs(data: dict[str, Any]) -> dict[str, Any]:
    return {key: data[key] for key in ("run_id", "correlation_id") if key in data}
