"""The channels people decide in besides the API: their configuration (`ChannelAdminService`) and
Slack's inbound side (interactions resolve pending calls, mentions start conversations). Their
outbound side (Slack messages, email digests) is in `deliveries`."""

from __future__ import annotations

from dataclasses import dataclass

from sursis.app.context_settings import ChannelSettings
from sursis.app.wiring.conversations import ConversationParts
from sursis.app.wiring.storage import StorageParts
from sursis.domain.channels.admin import ChannelAdminService
from sursis.domain.channels.slack import SlackInbound
from sursis.domain.clock import utcnow


@dataclass(frozen=True, slots=True)
class ChannelParts:
    channels: ChannelAdminService
    slack: SlackInbound


def wire_channels(
    settings: ChannelSettings, storage: StorageParts, conversations: ConversationParts
) -> ChannelParts:
    slack = SlackInbound(
        storage.uow,
        storage.notifier,
        conversations.pending_calls,
        agent=settings.slack_agent,
        clock=utcnow,
        max_content_chars=settings.max_content_chars,
        notice_workspace=settings.slack_workspace,
    )
    return ChannelParts(ChannelAdminService(storage.uow, clock=utcnow), slack)
