"""Slack interactivity: button presses and the modals they open, as HumanLayer's Slack approvals do.

Approve and Deny decide at once. "Deny with a reason…" and "Ask for a revision…" open a modal
(`views.open` with the press's `trigger_id`); its `view_submission` decides with what the person
wrote as the reason (a revision's instructions). A press or submission that decided updates the
approval message at once (`chat.update`: decided by the presser, the run resuming) before the
worker's own update, so the person sees the press took. Everything Slack sends is parsed by the
models of `sursis.app.schemas.slack`; what does not fit is ignored.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import TYPE_CHECKING, Annotated, Any, Literal

import structlog
from litestar import Response
from litestar.datastructures import State
from pydantic import Field

from sursis.app.channel_wiring import slack_client
from sursis.app.schemas.slack import (
    BlockActions,
    SlackId,
    SlackModel,
    SlackTs,
    ViewSubmission,
    fits,
)
from sursis.domain.channels.slack import SlackInbound, SlackPress
from sursis.domain.records import PendingCall
from sursis.domain.states import Decision, PendingStatus
from sursis.infra.channels import slack_messages as msg

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

log = structlog.get_logger("sursis.channels.slack")
SLACK_CALL_SECONDS = 2.0
"""Slack wants an answer within three seconds: a call made while answering gets two."""


def slack_errors() -> tuple[type[BaseException], ...]:
    """What a failed Slack Web API call raises. Only a call through a client gets here, so the
    Slack SDK and aiohttp (~10 MiB) are imported by the client, not by serving without Slack."""
    from aiohttp import ClientError
    from slack_sdk.errors import SlackApiError, SlackClientError

    return (SlackApiError, SlackClientError, ClientError, TimeoutError)


def provide_slack_web(state: State) -> Any:
    """The Slack Web API client of this app (None without a bot token), made once. (Typed `Any`:
    Litestar reads the annotation at run time, and the client is imported only when configured.)"""
    if "slack_web" not in state:
        state.slack_web = slack_client(state.container.settings.deliveries)
    return state.slack_web


MAX_LOOKUPS = 10
NAMES_KEPT_SECONDS = 3600.0


class UserNames:
    """Slack users' display names for mentions, looked up with `users.info` (at most `MAX_LOOKUPS`
    per message, within `SLACK_CALL_SECONDS / 2` in all) and kept for an hour in this process. A
    name that cannot be had in time stays the user id."""

    def __init__(self, web: AsyncWebClient | None, *, max_kept: int = 10_000) -> None:
        self._web = web
        self._kept: dict[str, tuple[float, str]] = {}
        self._max_kept = max_kept

    async def names(self, user_ids: list[str]) -> dict[str, str]:
        now = time.monotonic()
        known: dict[str, str] = {}
        for user_id in user_ids:
            kept = self._kept.get(user_id)
            if kept is not None and kept[0] > now:
                known[user_id] = kept[1]
        missing = [u for u in user_ids if u not in known][:MAX_LOOKUPS]
        if self._web is None or not missing:
            return known
        try:
            async with asyncio.timeout(SLACK_CALL_SECONDS / 2):
                found = await asyncio.gather(*(self._lookup(u) for u in missing))
        except TimeoutError:
            return known
        if len(self._kept) + len(found) > self._max_kept:
            self._kept.clear()
        for user_id, name in zip(missing, found, strict=True):
            if name:
                known[user_id] = name
                self._kept[user_id] = (now + NAMES_KEPT_SECONDS, name)
        return known

    async def _lookup(self, user_id: str) -> str | None:
        assert self._web is not None
        try:
            answer = await self._web.users_info(user=user_id)
        except slack_errors():
            return None
        user = answer.get("user") or {}
        profile = user.get("profile") or {}
        for name in (profile.get("display_name"), profile.get("real_name"), user.get("name")):
            if isinstance(name, str) and name.strip():
                return name.strip()[:80]
        return None


def provide_slack_names(state: State) -> Any:
    """The mention names of this app (one cache per app)."""
    if "slack_names" not in state:
        state.slack_names = UserNames(provide_slack_web(state))
    return state.slack_names


class ModalMetadata(SlackModel):
    """What a decision modal carries in its `private_metadata`, from the press that opened it."""

    correlation_id: uuid.UUID
    decision: Literal["deny", "revise"]
    channel_id: SlackId
    message_ts: SlackTs | None = None


class ReasonInput(SlackModel):
    value: Annotated[str, Field(max_length=msg.MAX_REASON)] | None = None


def outcome(value: str) -> Response[Any]:
    return Response({"ok": True, "outcome": value}, status_code=200)


async def on_payload(
    payload: dict[str, Any], slack: SlackInbound, web: AsyncWebClient | None
) -> Response[Any]:
    if (actions := fits(BlockActions, payload)) is not None:
        return await on_block_actions(actions, slack, web)
    if (submission := fits(ViewSubmission, payload)) is not None:
        return await on_submission(submission, slack, web)
    return outcome("ignored")


async def on_block_actions(
    actions: BlockActions, slack: SlackInbound, web: AsyncWebClient | None
) -> Response[Any]:
    action = actions.actions[0]
    correlation_id = msg.parse_correlation_id(action.value)
    channel_id = actions.channel.id if actions.channel else None
    if channel_id is None and actions.container is not None:
        channel_id = actions.container.channel_id
    message_ts = actions.container.message_ts if actions.container else None
    team_id = actions.team_id
    if correlation_id is None or team_id is None or channel_id is None:
        return outcome("ignored")
    if (decision := msg.DECISION_OF_ACTION.get(action.action_id)) is not None:
        press = SlackPress(team_id, actions.user.id, channel_id, correlation_id, Decision(decision))
        decided = await slack.press(press)
        log.info("slack.press", correlation_id=str(correlation_id), decided=decided is not None)
        if decided is None:
            return outcome("refused")
        if decided.status is PendingStatus.AWAITING:
            return outcome("voted")
        await acknowledge(web, decided, channel_id, message_ts, actions.user.id)
        return outcome("decided")
    if (modal := msg.MODAL_OF_ACTION.get(action.action_id)) is not None:
        if web is None or actions.trigger_id is None:
            return outcome("ignored")
        metadata = ModalMetadata(
            correlation_id=correlation_id, decision=modal, channel_id=channel_id, message_ts=message_ts
        )
        view = msg.decision_modal(modal, metadata.model_dump_json())
        try:
            async with asyncio.timeout(SLACK_CALL_SECONDS):
                await web.views_open(trigger_id=actions.trigger_id, view=view)
        except slack_errors() as exc:
            log.warning("slack.modal_not_opened", correlation_id=str(correlation_id), error=str(exc)[:200])
            return outcome("modal_failed")
        return outcome("modal_opened")
    return outcome("ignored")


async def on_submission(
    submission: ViewSubmission, slack: SlackInbound, web: AsyncWebClient | None
) -> Response[Any]:
    """A decision modal submitted: an empty 200 closes it; `response_action: errors` keeps it open
    with a message under the input."""
    if submission.view.callback_id != msg.MODAL_CALLBACK or submission.team_id is None:
        return outcome("ignored")
    try:
        metadata = ModalMetadata.model_validate(json.loads(submission.view.private_metadata))
    except ValueError:
        return outcome("ignored")
    entered = fits(
        ReasonInput, submission.view.state.values.get(msg.REASON_BLOCK, {}).get(msg.REASON_INPUT, {})
    )
    if entered is None:
        return errors(f"At most {msg.MAX_REASON} characters.")
    reason = (entered.value or "").strip() or None
    if metadata.decision == "revise" and reason is None:
        return errors("Say what the agent should change.")
    press = SlackPress(
        submission.team_id,
        submission.user.id,
        metadata.channel_id,
        metadata.correlation_id,
        Decision(metadata.decision),
        reason,
    )
    decided = await slack.press(press)
    log.info("slack.modal", correlation_id=str(metadata.correlation_id), decided=decided is not None)
    if decided is not None and decided.status is not PendingStatus.AWAITING:
        await acknowledge(web, decided, metadata.channel_id, metadata.message_ts, submission.user.id)
    return Response(content=b"", status_code=200, media_type="text/plain")


def errors(message: str) -> Response[Any]:
    return Response({"response_action": "errors", "errors": {msg.REASON_BLOCK: message}}, status_code=200)


async def acknowledge(
    web: AsyncWebClient | None, call: PendingCall, channel_id: str, message_ts: str | None, user_id: str
) -> None:
    """Show the decision on the pressed message at once; the worker's update follows (best effort:
    a failure here changes nothing, the decision is committed)."""
    if web is None or message_ts is None:
        return
    data = {
        "tool_name": call.tool_name,
        "effect_description": call.effect_description,
        "correlation_id": str(call.correlation_id),
    }
    text = msg.approval_acknowledged(data, call.status.value, user_id)
    try:
        async with asyncio.timeout(SLACK_CALL_SECONDS):
            await web.chat_update(
                channel=channel_id, ts=message_ts, text=text.text, blocks=text.block_dicts()
            )
    except slack_errors() as exc:
        log.warning("slack.ack_failed", correlation_id=str(call.correlation_id), error=repr(exc)[:200])
