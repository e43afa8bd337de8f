"""Slack's wire formats, parsed in one place: the signed request, the Events API envelope, the
interactivity form and its payloads, and the text of a message.

`signed_text` turns any malformed byte into a 4xx: a missing, non-numeric or stale timestamp or a
wrong signature is a 401 `bad_signature` (nothing in the body is read first), a signed body that
is not UTF-8 a 422. The pydantic models below then say what the service reads of the JSON; a
payload that does not fit is ignored (200, so Slack does not retry it) or refused (422), never
half-read.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sursis.domain.errors import BadSignature, ValidationFailed

MAX_SKEW_SECONDS = 60 * 5
TIMESTAMP = re.compile(r"[0-9]{1,12}")
SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")

# The bounds are the columns' (`slack_events.event_id` 100, team/channel/user ids and ts 50).
SlackId = Annotated[str, Field(min_length=1, max_length=50, pattern=r"^[A-Za-z0-9._:-]+$")]
SlackEventId = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:-]+$")]
SlackTs = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[0-9]+(\.[0-9]+)?$")]


def signed_text(
    body: bytes,
    headers: Mapping[str, str],
    secret: str | None,
    *,
    clock: Callable[[], float] = time.time,
) -> str:
    """The body as text, once Slack's signature over it is verified.

    The signature is `v0=` HMAC-SHA256 of `v0:{timestamp}:{body}` (the raw bytes) with the signing
    secret, compared in constant time; the timestamp must be digits within five minutes of now.
    """
    if secret is None:
        raise BadSignature("Slack requests are not accepted: no signing secret is configured")
    timestamp = headers.get("x-slack-request-timestamp") or ""
    signature = headers.get("x-slack-signature") or ""
    if not TIMESTAMP.fullmatch(timestamp) or not SIGNATURE.fullmatch(signature):
        raise BadSignature("the Slack signature or its timestamp is missing or malformed")
    if abs(clock() - int(timestamp)) > MAX_SKEW_SECONDS:
        raise BadSignature("the Slack signature is older than five minutes")
    expected = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256)
    if not hmac.compare_digest("v0=" + expected.hexdigest(), signature):
        raise BadSignature("the Slack signature is wrong")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("the body is not UTF-8") from None


def invalid(message: str, loc: tuple[str, ...] = ("body",)) -> ValidationFailed:
    return ValidationFailed(message, extra={"errors": [{"loc": list(loc), "msg": message}]})


def json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise invalid("the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise invalid("the body is not a JSON object")
    return value


def form_payload(text: str) -> dict[str, Any]:
    """The JSON object of an interactivity request's form field `payload`."""
    try:
        form = parse_qs(text, strict_parsing=True, max_num_fields=20)
    except ValueError:
        raise invalid("the body is not a form") from None
    raw = form.get("payload")
    if not raw or len(raw) != 1:
        raise invalid("the form has no single payload", ("body", "payload"))
    return json_object(raw[0])


M = TypeVar("M", bound=BaseModel)


def fits(model: type[M], value: Any) -> M | None:
    """`value` as `model`, or None when it does not fit (a payload the service does not act on)."""
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


class SlackModel(BaseModel):
    """Slack adds fields over time: unknown ones are ignored, the ones read are checked."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class MessageEvent(SlackModel):
    type: Literal["message"]
    channel: SlackId
    user: SlackId
    text: Annotated[str, Field(max_length=40_000)]
    ts: SlackTs
    thread_ts: SlackTs | None = None
    subtype: str | None = None
    bot_id: str | None = None
    team: SlackId | None = None


class EventCallback(SlackModel):
    type: Literal["event_callback"]
    event_id: SlackEventId
    team_id: SlackId | None = None
    event: dict[str, Any]


class UrlVerification(SlackModel):
    type: Literal["url_verification"]
    challenge: Annotated[str, Field(max_length=200)]


class Team(SlackModel):
    id: SlackId


class User(SlackModel):
    id: SlackId
    team_id: SlackId | None = None


class Channel(SlackModel):
    id: SlackId


class Action(SlackModel):
    action_id: Annotated[str, Field(max_length=255)]
    value: Annotated[str, Field(max_length=2000)] = ""


class Container(SlackModel):
    message_ts: SlackTs | None = None
    channel_id: SlackId | None = None


class BlockActions(SlackModel):
    type: Literal["block_actions"]
    team: Team | None = None
    user: User
    channel: Channel | None = None
    container: Container | None = None
    trigger_id: Annotated[str, Field(max_length=255)] | None = None
    actions: Annotated[list[Action], Field(min_length=1, max_length=20)]

    @property
    def team_id(self) -> str | None:
        return self.team.id if self.team else self.user.team_id


class ViewState(SlackModel):
    values: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)


class View(SlackModel):
    callback_id: Annotated[str, Field(max_length=255)]
    private_metadata: Annotated[str, Field(max_length=3000)] = ""
    state: ViewState = Field(default_factory=ViewState)


class ViewSubmission(SlackModel):
    type: Literal["view_submission"]
    team: Team | None = None
    user: User
    view: View

    @property
    def team_id(self) -> str | None:
        return self.team.id if self.team else self.user.team_id


MENTION = re.compile(r"<([@#!])([^<>|]*)(?:\|([^<>]*))?>")
LINK = re.compile(r"<((?:https?|mailto):[^<>|]*)(?:\|([^<>]*))?>")


def plain_text(text: str, names: Mapping[str, str] | None = None) -> str:
    """A message's text as a person wrote it: Slack's `&lt;` `&gt;` `&amp;` decoded, `<@U…>`
    mentions as `@name` (from `names`, else the user id), `<#C…|name>` as `#name`, `<!here>` as
    `@here`, and links as their label and URL."""
    known = names or {}

    def link(match: re.Match[str]) -> str:
        url, label = match.group(1), match.group(2)
        return f"{label} ({url})" if label and label != url else url

    def mention(match: re.Match[str]) -> str:
        sigil, target, label = match.groups()
        if sigil == "@":
            return "@" + (known.get(target) or label or target)
        if sigil == "#":
            return "#" + (label or target)
        return "@" + (label or target.split("^")[0])

    text = LINK.sub(link, text)
    text = MENTION.sub(mention, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def mentioned_users(text: str) -> list[str]:
    """The user ids `<@U…>` mentions in a message's text name, in order, once each."""
    seen: dict[str, None] = {}
    for sigil, target, _ in MENTION.findall(text):
        if sigil == "@" and target:
            seen[target] = None
    return list(seen)
