"""Slack inbound, in the service's own terms: a message in a thread, a button pressed.

Nothing here knows Slack's wire format (the app layer parses it); what Slack should be told back
(a notice in the thread, an ephemeral notice to one user) is queued on the outbox in the same
transaction, so an answer is never lost nor sent twice for one event.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sursis.domain.access import Permission
from sursis.domain.agents.agent_ports import RunNotifier
from sursis.domain.approvals.pending_calls import PendingCallService, Resolution
from sursis.domain.errors import Conflict, Forbidden, NotFound, RunActive, Stale, ValidationFailed
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import Conversation, PendingCall, Principal
from sursis.domain.records.channel_records import (
    SLACK_TOPIC,
    Channel,
    ChannelBinding,
    SlackAddress,
)
from sursis.domain.records.event_records import Outgoing
from sursis.domain.runs.run_queue import check_content, queue_or_hand_off
from sursis.domain.states import Decision, PendingStatus

UNMAPPED_NOTICE = (
    "This Slack user is not linked to an account of this service, so nothing was run. "
    "Ask an admin to map your Slack user id ({user_id}) to an API key."
)
BUSY_NOTICE = (
    "This conversation is still working on an earlier message (or waiting for a decision); nothing was run."
)


class Outcome(StrEnum):
    QUEUED = "queued"
    DUPLICATE = "duplicate"
    UNMAPPED = "unmapped"
    BUSY = "busy"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """A person's message in a Slack channel or thread (`thread_ts` None: a new thread)."""

    event_id: str
    team_id: str
    channel_id: str
    user_id: str
    ts: str
    thread_ts: str | None
    text: str

    @property
    def thread(self) -> SlackAddress:
        return SlackAddress(self.team_id, self.channel_id, self.thread_ts or self.ts)


@dataclass(frozen=True, slots=True)
class SlackPress:
    """A decision taken in Slack on an approval message: a button pressed (Approve, Deny), or a
    modal submitted (deny with a reason, ask for a revision) with what the person wrote."""

    team_id: str
    user_id: str
    channel_id: str
    correlation_id: uuid.UUID
    decision: Decision
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Received:
    outcome: Outcome
    conversation_id: uuid.UUID | None = None
    run_id: uuid.UUID | None = None


async def mapped_principal(uow: UnitOfWork, team_id: str, user_id: str) -> Principal | None:
    """The principal a Slack user acts as: its mapped key's, unless the key was revoked."""
    identity = await uow.channels.slack_identity(team_id, user_id)
    if identity is None:
        return None
    key = await uow.api_keys.get(identity.key_id)
    if key is None or key.revoked_at is not None:
        return None
    return key.principal()


async def queue_slack_notice(
    uow: UnitOfWork,
    workspace: str,
    address: SlackAddress,
    text: str,
    now: datetime,
    *,
    ephemeral_user: str | None = None,
) -> None:
    """A short notice to a thread (or, with `ephemeral_user`, to that user only)."""
    payload: dict[str, Any] = {
        "notice": {
            "team_id": address.team_id,
            "channel_id": address.channel_id,
            "thread_ts": address.thread_ts,
            "text": text,
            "ephemeral_user": ephemeral_user,
        }
    }
    await uow.outbox.enqueue(Outgoing(workspace, SLACK_TOPIC, payload), now)


class SlackInbound:
    """Messages from Slack become messages of the bound conversation; presses become decisions."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        notifier: RunNotifier,
        decisions: PendingCallService,
        *,
        agent: str,
        clock: Callable[[], datetime],
        max_content_chars: int,
        notice_workspace: str = "default",
    ) -> None:
        self._uow = uow
        self._notifier = notifier
        self._decisions = decisions
        self._agent = agent
        self._clock = clock
        self._max_content_chars = max_content_chars
        self._notice_workspace = notice_workspace

    async def receive(self, message: SlackMessage) -> Received:
        """Queue a run for the message (a new thread starts a conversation and its binding).

        The event id is recorded in the same transaction: a retry or a replay changes nothing.
        """
        now = self._clock()
        received = Received(Outcome.DUPLICATE)
        async with self._uow() as uow:
            if not await uow.channels.remember_slack_event(message.event_id, now):
                return received
            principal = await mapped_principal(uow, message.team_id, message.user_id)
            binding = await uow.channels.slack_binding(message.thread)
            if principal is None:
                workspace = binding.workspace if binding else self._notice_workspace
                text = UNMAPPED_NOTICE.format(user_id=message.user_id)
                await queue_slack_notice(uow, workspace, message.thread, text, now)
                received = Received(Outcome.UNMAPPED)
            else:
                received = await self._queue(uow, principal, message, binding, now)
            await uow.commit()
        if received.run_id is not None:
            await self._notifier.run_queued(received.run_id)
        return received

    async def _queue(
        self,
        uow: UnitOfWork,
        principal: Principal,
        message: SlackMessage,
        binding: ChannelBinding | None,
        now: datetime,
    ) -> Received:
        workspace = binding.workspace if binding else (principal.workspace or "default")
        try:
            check_content(message.text, self._max_content_chars)
            if binding is None:
                conversation = await self._start(uow, principal, message.thread, now)
            else:
                conversation = await self._bound_conversation(uow, principal, binding)
            run, _ = await queue_or_hand_off(
                uow, principal.id, conversation, message.text, now, Channel.SLACK, role=principal.role.value
            )
        except RunActive:
            await queue_slack_notice(uow, workspace, message.thread, BUSY_NOTICE, now)
            return Received(Outcome.BUSY, binding.conversation_id if binding else None)
        except (Forbidden, NotFound, ValidationFailed) as refused:
            await queue_slack_notice(uow, workspace, message.thread, f"Nothing was run: {refused}", now)
            return Received(Outcome.REFUSED, binding.conversation_id if binding else None)
        return Received(Outcome.QUEUED, conversation.id, run.id)

    async def _start(
        self, uow: UnitOfWork, principal: Principal, thread: SlackAddress, now: datetime
    ) -> Conversation:
        principal.require(Permission.CONVERSE)
        conversation = Conversation.open(principal.workspace or "default", self._agent, principal.id, now)
        await uow.conversations.add(conversation)
        await uow.channels.add_binding(
            ChannelBinding.new(conversation.workspace, conversation.id, principal.id, now, slack=thread)
        )
        return conversation

    @staticmethod
    async def _bound_conversation(
        uow: UnitOfWork, principal: Principal, binding: ChannelBinding
    ) -> Conversation:
        conversation = (
            await uow.conversations.get(binding.conversation_id) if binding.conversation_id else None
        )
        if conversation is None or not principal.can_see(conversation.workspace):
            raise NotFound("this thread's conversation is not one your account can see")
        principal.require(Permission.CONVERSE)
        return conversation

    async def press(self, press: SlackPress) -> PendingCall | None:
        """Decide a pending call as the presser's mapped principal, through the same path as
        `POST /v1/pending/{id}/resolve`: the call as decided; None when it was not, and then the
        presser gets an ephemeral notice and nothing changes. A vote that counts but does not decide
        (a quorum not reached yet) answers the call still awaiting, and the voter is told privately
        how many approvals are still needed."""
        async with self._uow() as uow:
            principal = await mapped_principal(uow, press.team_id, press.user_id)
        notice = ""
        decided: PendingCall | None = None
        if principal is None:
            notice = UNMAPPED_NOTICE.format(user_id=press.user_id)
        else:
            try:
                decided = await self._decisions.resolve_pending(
                    principal,
                    press.correlation_id,
                    Resolution(press.decision, reason=press.reason or f"decided in Slack by {press.user_id}"),
                )
            except Stale as stale:
                notice = f"Nothing changed: {stale}" + _who(stale.extra)
            except Conflict as conflict:
                notice = f"Nothing changed: {conflict}."
            except (Forbidden, NotFound) as refused:
                notice = f"Nothing changed: you may not decide this call ({refused})."
            except ValidationFailed as invalid:
                notice = f"Nothing changed: {invalid}"
        if decided is not None and decided.status is not PendingStatus.AWAITING:
            return decided
        if decided is not None:
            notice = _vote_counted(decided)
        async with self._uow() as uow:
            call = await uow.pending.get(press.correlation_id)
            workspace = call.workspace if call else self._notice_workspace
            address = SlackAddress(press.team_id, press.channel_id, "")
            await queue_slack_notice(
                uow, workspace, address, notice, self._clock(), ephemeral_user=press.user_id
            )
            await uow.commit()
        return decided


def _vote_counted(call: PendingCall) -> str:
    """What a voter whose vote did not decide the call is told, privately."""
    approval = call.approval
    if approval is None:
        return "Your vote is counted."
    return (
        f"Your vote is counted: {approval.approvals} of {approval.quorum} approvals, "
        f"{approval.still_needed} still needed."
    )


def _who(extra: dict[str, Any]) -> str:
    name = extra.get("resolved_by_name") or extra.get("resolved_by")
    return f" (decided by {name})." if name else "."
