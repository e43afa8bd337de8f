"""An escalated call put before a Slack channel or an email address.

A Slack channel gets the call with its buttons (a binding of the conversation to that channel,
whose thread the post opens, so the post is updated when the call is decided); an email address
gets the call in its next digest. Both go through the outbox, in the sweeper's transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sursis.domain.channels.fanout import enqueue_slack_notice
from sursis.domain.records import PendingCall
from sursis.domain.records.channel_records import (
    BindingKind,
    ChannelBinding,
    DigestItem,
    DigestItemKind,
    SlackAddress,
)

if TYPE_CHECKING:
    from sursis.domain.ports import UnitOfWork

OPENS_THREAD = "opens_thread"
"""An outbox row's flag: its post goes to the channel and opens the binding's thread."""
ESCALATION_ACTOR = "system:sweeper"


async def notify_target(uow: UnitOfWork, call: PendingCall, target: str, now: datetime) -> bool:
    """Queue the call for `slack:CHANNEL` or `email:ADDRESS`; False when it cannot be reached (a
    Slack channel of a workspace that has no Slack binding to learn its team from, or another form)."""
    kind, _, address = target.partition(":")
    if not address:
        return False
    if kind == "slack":
        return await _slack(uow, call, address, now)
    if kind == "email":
        await _email(uow, call, address, now)
        return True
    return False


async def _slack(uow: UnitOfWork, call: PendingCall, channel: str, now: datetime) -> bool:
    from sursis.domain.events.events import pending_created_data

    teams = [
        b.slack.team_id
        for b in await uow.channels.list_bindings(call.workspace, None)
        if b.kind is BindingKind.SLACK and b.slack is not None
    ]
    if not teams:
        return False
    slack = SlackAddress(teams[0], channel, None)
    binding = ChannelBinding.new(call.workspace, call.conversation_id, ESCALATION_ACTOR, now, slack=slack)
    await uow.channels.add_binding(binding)
    envelope = {
        "id": 0,
        "type": "pending.created",
        "workspace": call.workspace,
        "conversation_id": str(call.conversation_id),
        "created_at": now.isoformat(),
        "data": pending_created_data(call),
    }
    await enqueue_slack_notice(uow, binding, envelope, now, **{OPENS_THREAD: True})
    return True


async def _email(uow: UnitOfWork, call: PendingCall, address: str, now: datetime) -> None:
    binding = ChannelBinding.new(call.workspace, call.conversation_id, ESCALATION_ACTOR, now, email=address)
    await uow.channels.add_binding(binding)
    summary = f"Escalated approval waiting: {call.tool_name} — {call.effect_description}"
    await uow.channels.add_digest_items(
        [
            DigestItem(
                binding_id=binding.id,
                conversation_id=call.conversation_id,
                kind=DigestItemKind.APPROVAL_WAITING,
                summary=summary[:500],
                created_at=now,
                data={"correlation_id": str(call.correlation_id), "run_id": str(call.run_id)},
            )
        ]
    )
