"""Slack's requests: the Events API and interactivity (button presses).

These two routes are authenticated by Slack's request signature, not by an API key: each request
is checked with `slack_sdk.signature.SignatureVerifier` (HMAC-SHA256 of `v0:{timestamp}:{body}`
with the signing secret, compared in constant time, the timestamp within five minutes) before
anything in it is read. A request that fails the check answers 401 and nothing is stored. Both
answer at once: a message's run is queued for a worker, never run here.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

import structlog
from litestar import Request, Response, Router, post
from litestar.di import NamedDependency
from litestar.status_codes import HTTP_200_OK
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier

from sursis.app.openapi_contract import SLACK_SIGNATURE_SCHEME
from sursis.app.routes.provide import service
from sursis.domain.channels.slack import SlackInbound, SlackMessage, SlackPress
from sursis.domain.errors import BadSignature, ValidationFailed
from sursis.domain.states import Decision
from sursis.infra.channels.slack_messages import DECISION_OF_ACTION, parse_correlation_id

PERSON_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})
"""Message subtypes that are a person writing; the others (bots, this one too, edits, deletions,
joins) are ignored."""

log = structlog.get_logger("sursis.channels.slack")


async def signed_body(request: Request[Any, Any, Any], secret: SecretStr | None) -> bytes:
    """The raw body, once its Slack signature is verified; `BadSignature` otherwise."""
    if secret is None:
        raise BadSignature("Slack requests are not accepted: no signing secret is configured")
    body = await request.body()
    verifier = SignatureVerifier(secret.get_secret_value())
    if not verifier.is_valid(
        body,
        request.headers.get("x-slack-request-timestamp"),
        request.headers.get("x-slack-signature"),
    ):
        raise BadSignature("the Slack signature is missing, wrong, or older than five minutes")
    return body


def _invalid(message: str) -> ValidationFailed:
    return ValidationFailed(message, extra={"errors": [{"loc": ["body"], "msg": message}]})


def _json_object(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise _invalid("the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise _invalid("the body is not a JSON object")
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def person_message(envelope: dict[str, Any]) -> SlackMessage | None:
    """The person's message an `event_callback` carries; None for anything else (bots included)."""
    event = envelope.get("event")
    if not isinstance(event, dict) or event.get("type") != "message":
        return None
    if event.get("bot_id") or event.get("subtype") not in PERSON_SUBTYPES:
        return None
    fields = (
        _text(envelope.get("event_id")),
        _text(envelope.get("team_id")) or _text(event.get("team")),
        _text(event.get("channel")),
        _text(event.get("user")),
        _text(event.get("ts")),
    )
    text = event.get("text")
    if any(f is None for f in fields) or not isinstance(text, str):
        return None
    event_id, team_id, channel_id, user_id, ts = (str(f) for f in fields)
    return SlackMessage(event_id, team_id, channel_id, user_id, ts, _text(event.get("thread_ts")), text)


@post(
    "/v1/channels/slack/events",
    tags=["channels"],
    status_code=HTTP_200_OK,
    security=[{SLACK_SIGNATURE_SCHEME: []}],
)
async def slack_events(
    request: Request[Any, Any, Any],
    slack: NamedDependency[SlackInbound],
    slack_signing_secret: NamedDependency[SecretStr | None],
) -> Response[dict[str, Any]]:
    """Slack's Events API request URL: answers the `url_verification` challenge; a person's message
    in a channel or thread becomes a message of the thread's conversation (a new thread starts
    one). Retries and replays of an `event_id` change nothing; bots' messages are ignored."""
    envelope = _json_object(await signed_body(request, slack_signing_secret))
    kind = envelope.get("type")
    if kind == "url_verification":
        return Response({"challenge": str(envelope.get("challenge", ""))}, status_code=HTTP_200_OK)
    if kind != "event_callback":
        return Response({"ok": True, "outcome": "ignored"}, status_code=HTTP_200_OK)
    message = person_message(envelope)
    if message is None:
        return Response({"ok": True, "outcome": "ignored"}, status_code=HTTP_200_OK)
    received = await slack.receive(message)
    log.info(
        "slack.event",
        event_id=message.event_id,
        outcome=received.outcome.value,
        retry=request.headers.get("x-slack-retry-num"),
    )
    return Response({"ok": True, "outcome": received.outcome.value}, status_code=HTTP_200_OK)


def button_press(payload: dict[str, Any]) -> SlackPress | None:
    """The Approve or Deny press a `block_actions` payload carries; None for anything else."""
    if payload.get("type") != "block_actions":
        return None
    user = payload.get("user") or {}
    team = payload.get("team") or {}
    channel = payload.get("channel") or {}
    actions = payload.get("actions") or []
    if not (isinstance(user, dict) and isinstance(team, dict) and isinstance(channel, dict)):
        return None
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        return None
    action = actions[0]
    decision = DECISION_OF_ACTION.get(str(action.get("action_id")))
    correlation_id = parse_correlation_id(str(action.get("value")))
    team_id = _text(team.get("id")) or _text(user.get("team_id"))
    user_id, channel_id = _text(user.get("id")), _text(channel.get("id"))
    if decision is None or correlation_id is None or not (team_id and user_id and channel_id):
        return None
    return SlackPress(team_id, user_id, channel_id, correlation_id, Decision(decision))


@post(
    "/v1/channels/slack/interactions",
    tags=["channels"],
    status_code=HTTP_200_OK,
    security=[{SLACK_SIGNATURE_SCHEME: []}],
)
async def slack_interactions(
    request: Request[Any, Any, Any],
    slack: NamedDependency[SlackInbound],
    slack_signing_secret: NamedDependency[SecretStr | None],
) -> Response[dict[str, Any]]:
    """Slack's interactivity request URL (form-encoded `payload`): an Approve or Deny press decides
    the pending call as the presser's mapped key, as `POST /v1/pending/{id}/resolve` would. A
    presser who may not decide it, or a press on a call already decided, gets an ephemeral notice
    and changes nothing."""
    body = await signed_body(request, slack_signing_secret)
    try:
        form = parse_qs(body.decode(), strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise _invalid("the body is not a form") from None
    raw = form.get("payload")
    if not raw:
        raise _invalid("the form has no payload")
    press = button_press(_json_object(raw[0]))
    if press is None:
        return Response({"ok": True, "outcome": "ignored"}, status_code=HTTP_200_OK)
    decided = await slack.press(press)
    log.info("slack.press", correlation_id=str(press.correlation_id), decided=decided)
    return Response({"ok": True, "outcome": "decided" if decided else "refused"}, status_code=HTTP_200_OK)


def slack_router() -> Router:
    """Outside the API-key middleware: Slack signs its requests instead."""
    return Router(
        path="/",
        route_handlers=[slack_events, slack_interactions],
        dependencies={
            "slack": service("slack"),
            "slack_signing_secret": service("settings.slack_signing_secret"),
        },
    )
