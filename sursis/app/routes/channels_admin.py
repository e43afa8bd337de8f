"""Managing channels over the API: Slack users mapped to keys (admins), email bindings (operators)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Controller, delete, get, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_204_NO_CONTENT

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas.channels import (
    BindingOut,
    CreateBinding,
    CreateSlackBinding,
    MapSlackUser,
    SlackId,
    SlackUserOut,
    binding_out,
)
from sursis.domain.access import Permission
from sursis.domain.channels.admin import ChannelAdminService
from sursis.domain.records import Principal


class SlackUserController(Controller):
    path = "/v1/channels/slack/users"
    tags = ["channels"]
    dependencies = services("channels")
    guards = [requires(Permission.MANAGE_KEYS)]

    @get("/")
    async def list_users(
        self, channels: NamedDependency[ChannelAdminService], principal: NamedDependency[Principal]
    ) -> list[SlackUserOut]:
        """Every Slack user mapped to a key."""
        users = await channels.list_slack_users(principal)
        return [SlackUserOut.model_validate(u) for u in users]

    @put("/{team_id:str}/{user_id:str}", status_code=HTTP_200_OK)
    async def map_user(
        self,
        team_id: FromPath[SlackId],
        user_id: FromPath[SlackId],
        data: JSONBody[MapSlackUser],
        channels: NamedDependency[ChannelAdminService],
        principal: NamedDependency[Principal],
    ) -> SlackUserOut:
        """Map a Slack user (team id, user id) to an API key: the user's messages and button presses
        act as that key's principal. Mapping again replaces the key."""
        identity = await channels.map_slack_user(principal, team_id, user_id, data.key_id)
        return SlackUserOut.model_validate(identity)

    @delete("/{team_id:str}/{user_id:str}", status_code=HTTP_204_NO_CONTENT)
    async def unmap_user(
        self,
        team_id: FromPath[SlackId],
        user_id: FromPath[SlackId],
        channels: NamedDependency[ChannelAdminService],
        principal: NamedDependency[Principal],
    ) -> None:
        """Remove a mapping: the user's messages are answered with a notice again."""
        await channels.unmap_slack_user(principal, team_id, user_id)


class BindingController(Controller):
    path = "/v1/channels/bindings"
    tags = ["channels"]
    dependencies = services("channels")

    @get("/")
    async def list_bindings(
        self,
        channels: NamedDependency[ChannelAdminService],
        principal: NamedDependency[Principal],
        conversation_id: Annotated[uuid.UUID | None, QueryParameter()] = None,
    ) -> list[BindingOut]:
        """The channel bindings of the caller's workspace (every workspace for an admin)."""
        bindings = await channels.list_bindings(principal, conversation_id)
        return [binding_out(b) for b in bindings]

    @post("/", status_code=HTTP_201_CREATED, guards=[requires(Permission.MANAGE_WEBHOOKS)])
    async def create(
        self,
        data: JSONBody[CreateBinding],
        channels: NamedDependency[ChannelAdminService],
        principal: NamedDependency[Principal],
    ) -> BindingOut:
        """Bind an email address to a conversation (or every conversation of a workspace): it gets one
        digest per window of the approvals waiting, the runs that failed and the conversations the
        service started. Or bind a Slack channel to a workspace: each conversation the service
        starts opens a thread there."""
        body = data.root
        if isinstance(body, CreateSlackBinding):
            binding = await channels.bind_slack_channel(
                principal, body.team_id, body.channel_id, body.workspace
            )
        else:
            binding = await channels.bind_email(principal, body.email, body.conversation_id, body.workspace)
        return binding_out(binding)

    @delete("/{binding_id:uuid}", status_code=HTTP_204_NO_CONTENT)
    async def remove(
        self,
        binding_id: FromPath[uuid.UUID],
        channels: NamedDependency[ChannelAdminService],
        principal: NamedDependency[Principal],
    ) -> None:
        """Unbind: nothing more is delivered to it; items not yet in a digest are dropped."""
        await channels.delete_binding(principal, binding_id)


def channel_route_handlers() -> list[Any]:
    return [SlackUserController, BindingController]
