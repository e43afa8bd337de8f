"""Channels: where a conversation is also spoken, beside the conversation and never inside it.

A conversation knows nothing of Slack or email. A `ChannelBinding` attaches one address (a Slack
thread, an email address) to a conversation; a conversation may have several. Outbound notices go
to every binding. A binding without a conversation belongs to a workspace: an email address gets
the digest of all its conversations, a Slack channel gets a thread for each conversation the
service starts on its own (from a platform event).

The records sit beside the unit of work's ports (as `_channel_ports`, which names them) rather than
in `channels/`, so that `ports` need not import the channels package.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Channel(StrEnum):
    """Where a message came from; recorded on the run and on every message it writes."""

    WEB = "web"
    SLACK = "slack"
    EMAIL = "email"
    SYSTEM = "system"


class BindingKind(StrEnum):
    SLACK = "slack"
    EMAIL = "email"


@dataclass(frozen=True, slots=True)
class SlackAddress:
    """A Slack thread: the team, the channel and the `ts` of the thread's first message.

    `thread_ts` is None for a channel (a workspace binding, where the service announces the
    conversations it starts) and for a thread the service has not posted its first message in yet.
    """

    team_id: str
    channel_id: str
    thread_ts: str | None


@dataclass(frozen=True, slots=True)
class SlackPost:
    """What a delivery posted, recorded with it: where, its `ts`, the call it asks about, and
    whether it opened the binding's thread."""

    binding_id: uuid.UUID
    channel_id: str
    ts: str
    correlation_id: uuid.UUID | None = None
    opens_thread: bool = False


@dataclass(frozen=True, slots=True)
class ChannelBinding:
    """One address a conversation (or, for email, a whole workspace) is delivered to."""

    id: uuid.UUID
    workspace: str
    conversation_id: uuid.UUID | None
    kind: BindingKind
    created_by: str
    created_at: datetime
    slack: SlackAddress | None = None
    email: str | None = None

    @classmethod
    def new(
        cls,
        workspace: str,
        conversation_id: uuid.UUID | None,
        created_by: str,
        created_at: datetime,
        *,
        slack: SlackAddress | None = None,
        email: str | None = None,
    ) -> ChannelBinding:
        """A binding with a new id, to a Slack address or to an email address (its kind follows)."""
        return cls(
            id=uuid.uuid4(),
            workspace=workspace,
            conversation_id=conversation_id,
            kind=BindingKind.SLACK if slack is not None else BindingKind.EMAIL,
            created_by=created_by,
            created_at=created_at,
            slack=slack,
            email=email,
        )

    @property
    def address(self) -> str:
        """A human-readable address: `slack:T/C/ts` or the email address."""
        if self.slack is not None:
            thread = f"/{self.slack.thread_ts}" if self.slack.thread_ts else ""
            return f"slack:{self.slack.team_id}/{self.slack.channel_id}{thread}"
        return self.email or ""


@dataclass(frozen=True, slots=True)
class SlackIdentity:
    """An admin's mapping of one Slack user to an API key: the user acts as the key's principal."""

    team_id: str
    user_id: str
    key_id: uuid.UUID
    created_by: str
    created_at: datetime


class DigestItemKind(StrEnum):
    APPROVAL_WAITING = "approval_waiting"
    CONVERSATION_STARTED = "conversation_started"
    RUN_FAILED = "run_failed"


@dataclass(frozen=True, slots=True)
class DigestItem:
    """One line of a coming email digest."""

    binding_id: uuid.UUID
    conversation_id: uuid.UUID
    kind: DigestItemKind
    summary: str
    created_at: datetime
    data: dict[str, Any] = field(default_factory=dict)
    id: int | None = None


@dataclass(frozen=True, slots=True)
class Digest:
    """One email of one binding for one window, with the items it lists."""

    id: uuid.UUID
    binding: ChannelBinding
    window_end: datetime
    attempts: int
    items: tuple[DigestItem, ...]


@dataclass(frozen=True, slots=True)
class DigestEnd:
    """How one attempt to send a digest ended: `sent`, `failed` (for good), or back to `pending`
    until `retry_at` (a send refused before any of it was accepted); `error` says why."""

    status: str
    error: str | None = None
    retry_at: datetime | None = None


SLACK_TOPIC = "channel:slack"
"""Outbox rows for Slack (`channel:slack`): a post to a thread, an approval, an update, a notice."""
