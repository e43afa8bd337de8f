"""Managing channels: admins map Slack users to keys; operators bind email addresses."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import datetime

from sursis.domain.access import Permission
from sursis.domain.errors import NotFound, ValidationFailed
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records import Principal
from sursis.domain.records.channel_records import ChannelBinding, SlackAddress, SlackIdentity

# An ASCII address as HTML's `type=email` takes it, with a dot in the domain: the same in Python's
# `re` and in the OpenAPI document's ECMAScript regex (no `\s`, whose meaning differs).
EMAIL_PATTERN = re.compile(
    r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"
)


def _not_visible(field: str, message: str) -> ValidationFailed:
    """A body naming something the key cannot see: the request is wrong, not the path."""
    return ValidationFailed(message, extra={"errors": [{"loc": [field], "msg": message}]})


def check_email(address: str) -> str:
    if len(address) > 320 or not EMAIL_PATTERN.match(address):
        raise ValidationFailed(
            "not an email address", extra={"errors": [{"loc": ["email"], "msg": "not an email address"}]}
        )
    return address


class ChannelAdminService:
    """Slack user mappings (admins) and email bindings (operators of the workspace)."""

    def __init__(self, uow: UnitOfWorkFactory, *, clock: Callable[[], datetime]) -> None:
        self._uow = uow
        self._clock = clock

    async def map_slack_user(
        self, principal: Principal, team_id: str, user_id: str, key_id: uuid.UUID
    ) -> SlackIdentity:
        """Map (or re-map) a Slack user to an API key; the user then acts as that key's principal."""
        principal.require(Permission.MANAGE_KEYS)
        identity = SlackIdentity(team_id, user_id, key_id, principal.id, self._clock())
        async with self._uow() as uow:
            key = await uow.api_keys.get(key_id)
            if key is None or key.revoked_at is not None:
                raise ValidationFailed(
                    "no such key, or it is revoked",
                    extra={"errors": [{"loc": ["key_id"], "msg": "no active key with this id"}]},
                )
            await uow.channels.map_slack_user(identity)
            await uow.commit()
        return identity

    async def list_slack_users(self, principal: Principal) -> list[SlackIdentity]:
        principal.require(Permission.MANAGE_KEYS)
        async with self._uow() as uow:
            return await uow.channels.list_slack_users()

    async def unmap_slack_user(self, principal: Principal, team_id: str, user_id: str) -> None:
        principal.require(Permission.MANAGE_KEYS)
        async with self._uow() as uow:
            if not await uow.channels.delete_slack_user(team_id, user_id):
                raise NotFound("no such Slack user mapping")
            await uow.commit()

    async def bind_email(
        self,
        principal: Principal,
        email: str,
        conversation_id: uuid.UUID | None,
        workspace: str | None,
    ) -> ChannelBinding:
        """An email digest for one conversation, or (no conversation) for every conversation of the
        workspace."""
        check_email(email)
        async with self._uow() as uow:
            if conversation_id is not None:
                conversation = await uow.conversations.get(conversation_id)
                if conversation is None or not principal.can_see(conversation.workspace):
                    raise _not_visible("conversation_id", "no conversation with this id in your workspace")
                ws = conversation.workspace
            else:
                ws = _visible_workspace(principal, workspace)
            principal.require(Permission.MANAGE_WEBHOOKS)
            binding = ChannelBinding.new(ws, conversation_id, principal.id, self._clock(), email=email)
            await uow.channels.add_binding(binding)
            await uow.commit()
        return binding

    async def bind_slack_channel(
        self, principal: Principal, team_id: str, channel_id: str, workspace: str | None
    ) -> ChannelBinding:
        """A Slack channel where each conversation the service starts in the workspace (from a
        platform event) opens a thread; replies in the thread continue that conversation."""
        ws = _visible_workspace(principal, workspace)
        principal.require(Permission.MANAGE_WEBHOOKS)
        slack = SlackAddress(team_id, channel_id, None)
        binding = ChannelBinding.new(ws, None, principal.id, self._clock(), slack=slack)
        async with self._uow() as uow:
            await uow.channels.add_binding(binding)
            await uow.commit()
        return binding

    async def list_bindings(
        self, principal: Principal, conversation_id: uuid.UUID | None
    ) -> list[ChannelBinding]:
        principal.require(Permission.MANAGE_WEBHOOKS)
        if not principal.is_admin and principal.workspace is None:
            return []
        async with self._uow() as uow:
            return await uow.channels.list_bindings(
                None if principal.is_admin else principal.workspace, conversation_id
            )

    async def delete_binding(self, principal: Principal, binding_id: uuid.UUID) -> None:
        async with self._uow() as uow:
            binding = await uow.channels.get_binding(binding_id)
            if binding is None or not principal.can_see(binding.workspace):
                raise NotFound("binding not found")
            principal.require(Permission.MANAGE_WEBHOOKS)
            await uow.channels.delete_binding(binding_id)
            await uow.commit()


def _visible_workspace(principal: Principal, workspace: str | None) -> str:
    """The workspace named (the principal's own by default), if the principal can see it."""
    ws = workspace or principal.workspace or "default"
    if not principal.can_see(ws):
        raise _not_visible("workspace", "not a workspace your key can see")
    return ws
