"""Channels: Slack user mappings and channel bindings."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from abeyance.app.schemas.access import WorkspaceName
from abeyance.app.schemas.validation import FromRecord, Strict
from abeyance.domain.channels.records import ChannelBinding

SlackId = Annotated[str, Field(min_length=1, max_length=50, pattern=r"^[A-Za-z0-9]+$")]


class MapSlackUser(Strict):
    key_id: uuid.UUID = Field(description="The API key whose principal the Slack user acts as")


class SlackUserOut(FromRecord):
    team_id: str
    user_id: str
    key_id: uuid.UUID
    created_by: str
    created_at: datetime


class CreateBinding(Strict):
    """An email address (`kind: email`) for one conversation or every conversation of a workspace;
    or a workspace's Slack channel (`kind: slack`) where each conversation the service starts opens
    a thread. (Slack threads people start bind themselves.)"""

    kind: Literal["email", "slack"]
    email: str | None = Field(default=None, min_length=3, max_length=320, description="`kind: email`")
    conversation_id: uuid.UUID | None = Field(
        default=None,
        description="`kind: email`: one conversation; omitted: every conversation of the workspace",
    )
    team_id: SlackId | None = Field(default=None, description="`kind: slack`")
    channel_id: SlackId | None = Field(default=None, description="`kind: slack`")
    workspace: WorkspaceName | None = Field(
        default=None, description="Without a conversation: admins only; defaults to the key's"
    )

    @model_validator(mode="after")
    def fields_of_its_kind(self) -> CreateBinding:
        if self.kind == "email" and (self.email is None or self.team_id or self.channel_id):
            raise ValueError("kind email takes an email (and no team_id or channel_id)")
        if self.kind == "slack" and (
            not self.team_id or not self.channel_id or self.email is not None or self.conversation_id
        ):
            raise ValueError("kind slack takes a team_id and a channel_id (and no email or conversation_id)")
        return self


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
