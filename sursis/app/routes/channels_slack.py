"""Slack's requests: the Events API and interactivity (button presses).

These two routes are authenticated by Slack's request signature, not by an API key: each request
is checked by `sursis.app.schemas.slack.signed_text` (HMAC-SHA256 of `v0:{timestamp}:{body}` with
the signing secret, compared in constant time, the timestamp within five minutes) before anything
in it is read. A request that fails the check answers 401 and nothing is stored; a signed body that
is not UTF-8, JSON or a form answers 422. Both
answer at once: a message's run is queued for a worker, never run here.
"""

from __future__ import annotations

from typing import Any

import structlog
from litestar import Request, Response, Router, post
from litestar.di import NamedDependency, Provide
from litestar.status_codes import HTTP_200_OK
from pydantic import SecretStr

from sursis.app.openapi_contract import SLACK_SIGNATURE_SCHEME
from sursis.app.routes.provide import service
from sursis.app.routes.slack_interactions import (
    UserNames,
    on_payload,
    provide_slack_names,
    provide_slack_web,
)
from sursis.app.schemas.slack import (
    EventCallback,
    MessageEvent,
    UrlVerification,
    fits,
    form_payload,
    json_object,
    mentioned_users,
    plain_text,
    signed_text,
)
from sursis.domain.channels.slack import SlackInbound, SlackMessage

PERSON_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})
"""Message subtypes that are a person writing; the others (bots, this one too, edits, deletions,
joins) are ignored."""

log = structlog.get_logger("sursis.channels.slack")


async def signed_body(request: Request[Any, Any, Any], secret: SecretStr | None) -> str:
    """The body as text, once its Slack signature is verified (`signed_text`)."""
    body = await request.body()
    return signed_text(body, request.headers, secret.get_secret_value() if secret else None)


async def person_message(envelope: EventCallback, names: UserNames) -> SlackMessage | None:
    """The person's message an `event_callback` carries; None for anything else (bots included).
    Its text is plain text: Slack's entities decoded, mentions (by name) and links spelled out."""
    event = fits(MessageEvent, envelope.event)
    if event is None or event.bot_id or event.subtype not in PERSON_SUBTYPES:
        return None
    team_id = envelope.team_id or event.team
    if team_id is None:
        return None
    text = plain_text(event.text, await names.names(mentioned_users(event.text)))
    return SlackMessage(
        envelope.event_id, team_id, event.channel, event.user, event.ts, event.thread_ts, text
    )


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
    slack_names: NamedDependency[Any],
) -> Response[dict[str, Any]]:
    """Slack's Events API request URL: answers the `url_verification` challenge; a person's message
    in a channel or thread becomes a message of the thread's conversation (a new thread starts
    one). Retries and replays of an `event_id` change nothing; bots' messages are ignored."""
    envelope = json_object(await signed_body(request, slack_signing_secret))
    if (challenge := fits(UrlVerification, envelope)) is not None:
        return Response({"challenge": challenge.challenge}, status_code=HTTP_200_OK)
    callback = fits(EventCallback, envelope)
    message = await person_message(callback, slack_names) if callback is not None else None
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
    slack_web: NamedDependency[Any],
) -> Response[Any]:
    """Slack's interactivity request URL (form-encoded `payload`): Approve or Deny decides the
    pending call as the presser's mapped key, as `POST /v1/pending/{id}/resolve` would; "Deny with a
    reason…" and "Ask for a revision…" open a modal whose submission decides with what was written.
    A presser who may not decide it, or a press on a call already decided, gets an ephemeral notice
    and changes nothing."""
    payload = form_payload(await signed_body(request, slack_signing_secret))
    return await on_payload(payload, slack, slack_web)


def slack_router() -> Router:
    """Outside the API-key middleware: Slack signs its requests instead."""
    return Router(
        path="/",
        route_handlers=[slack_events, slack_interactions],
        dependencies={
            "slack": service("slack"),
            "slack_web": Provide(provide_slack_web, sync_to_thread=False),
            "slack_names": Provide(provide_slack_names, sync_to_thread=False),
            "slack_signing_secret": service("settings.slack_signing_secret"),
        },
    )
