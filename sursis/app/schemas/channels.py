"""Channels: Slack user mappings and channel bindings."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, RootModel

from sursis.app.schemas.validation import FromRecord, Strict, WorkspaceName
from sursis.domain.channels.admin import EMAIL_PATTERN
from sursis.domain.records.channel_records import ChannelBinding

SlackId = Annotated[str, Field(min_length=1, max_length=50, pattern=r"^[A-Za-z0-9]+$")]


class MapSlackUser(Strict):
    key_id: uuid.UUID = Field(description="The API key whose principal the Slack user acts as")


class SlackUserOut(FromRecord):
    team_id: str
    user_id: str
    key_id: uuid.UUID
    created_by: str
    created_at: datetime


EmailAddress = Annotated[
    str, Field(min_length=3, max_length=320, pattern=EMAIL_PATTERN.pattern, examples=["ops@example.com"])
]


class CreateEmailBinding(Strict):
    """An email address that gets one digest per window, for one conversation or (without
    `conversation_id`) every conversation of a workspace."""

    kind: Literal["email"]
    email: EmailAddress
    conversation_id: uuid.UUID | None = Field(
        default=None, description="One conversation; omitted: every conversation of the workspace"
    )
    workspace: WorkspaceName | None = Field(
        default=None,
        description="Without a conversation: admins only; defaults to the key's. Ignored with one.",
    )


class CreateSlackBinding(Strict):
    """A workspace's Slack channel, where each conversation the service starts opens a thread.
    (Slack threads people start bind themselves.)"""

    kind: Literal["slack"]
    team_id: SlackId
    channel_id: SlackId
    workspace: WorkspaceName | None = Field(default=None, description="Admins only; defaults to the key's")


AnyBinding = Annotated[CreateEmailBinding | CreateSlackBinding, Field(discriminator="kind")]


class CreateBinding(RootModel[AnyBinding]):
    """An email binding or a Slack channel binding, told apart by `kind`."""


class SlackAddressOut(BaseModel):
    team_id: str
    channel_id: str
    thread_ts: str | None = Field(
        description="The thread; null for a workspace's channel, or a thread not opened yet"
    )


class BindingOut(BaseModel):
    id: uuid.UUID
    workspace: str
    conversation_id: uuid.UUID | None
    kind: str
    email: str | None
    slack: SlackAddressOut | None
    created_by: str
    created_at: datetime


def binding_out(binding: ChannelBinding) -> BindingOut:
    slack = binding.slack
    return BindingOut(
        id=binding.id,
        workspace=binding.workspace,
        conversation_id=binding.conversation_id,
        kind=binding.kind.value,
        email=binding.email,
        slack=SlackAddressOut(team_id=slack.team_id, channel_id=slack.channel_id, thread_ts=slack.thread_ts)
        if slack
        else None,
        created_by=binding.created_by,
        created_at=binding.created_at,
    )
