"""The live event streams (server-sent events) of a conversation and of a workspace's pending calls,
and the webhooks that mirror them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Controller, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter
from litestar.response import ServerSentEvent
from litestar.response.sse import ServerSentEventMessage
from litestar.status_codes import HTTP_201_CREATED, HTTP_204_NO_CONTENT

from sursis.app.auth import requires
from sursis.app.container import Container
from sursis.app.routes.provide import services
from sursis.app.schemas import (
    MAX_ROW_ID,
    CreateWebhook,
    WebhookCreatedOut,
    WebhookOut,
    webhook_created_out,
    webhook_out,
)
from sursis.app.settings import Settings
from sursis.domain.access import Permission
from sursis.domain.conversations.conversations import ConversationService
from sursis.domain.encryption import EncryptedValueUnreadable, EncryptionKeyUnavailable
from sursis.domain.events.events import EventService
from sursis.domain.events.webhooks import WebhookService
from sursis.domain.records import Principal
from sursis.infra.notifier import LocalRunNotifier

BATCH = 500
STREAM = "text/event-stream"
# Litestar leaves a bound of 0 out of the document (it is falsy): said here again.
ZERO_MINIMUM: dict[str, Any] = {"minimum": 0}
RECONNECT_MS = 2000

LastEventId = Annotated[
    int | None,
    HeaderParameter(
        name="Last-Event-ID",
        ge=0,
        le=MAX_ROW_ID,
        description="Resume after this event id (sent by EventSource)",
        schema_extra=ZERO_MINIMUM,
    ),
]
After = Annotated[
    int | None,
    QueryParameter(
        ge=0,
        le=MAX_ROW_ID,
        description="Resume after this event id (for clients that cannot set headers)",
        schema_extra=ZERO_MINIMUM,
    ),
]


def _resume_from(last_event_id: int | None, after: int | None) -> int:
    """Where a stream resumes; both values are checked (422) before the stream starts: once it has
    answered 200, a bad value could only end it. The header wins over `?after=`."""
    return last_event_id if last_event_id is not None else after or 0


@dataclass(frozen=True, slots=True)
class EventFeeds:
    """What the live streams read: the stored events, the wake-ups on new ones, and the timing."""

    events: EventService
    notifier: LocalRunNotifier
    settings: Settings
    listen: Callable[[], None]
    """Start listening for commits made in other processes (PostgreSQL `LISTEN`), once."""


def provide_feeds(state: State) -> EventFeeds:
    container: Container = state.container
    return EventFeeds(container.events, container.notifier, container.settings, container.listen_for_events)


FEEDS = {"feeds": Provide(provide_feeds, sync_to_thread=False)}


async def ending_on_unreadable(
    stream: AsyncIterator[ServerSentEventMessage],
) -> AsyncIterator[ServerSentEventMessage]:
    """`stream`, ended by an `error` event with the problem's `code` (and `key_id`) when a stored
    event cannot be decrypted (docs/encryption.md), instead of a dropped connection."""
    async with contextlib.aclosing(stream):  # type: ignore[type-var]
        try:
            async for message in stream:
                yield message
        except (EncryptionKeyUnavailable, EncryptedValueUnreadable) as exc:
            yield ServerSentEventMessage(
                event="error", data=json.dumps({"code": exc.code, "detail": exc.message, **exc.extra})
            )


async def stream_events(
    feeds: EventFeeds, principal: Principal, conversation_id: uuid.UUID, after: int
) -> AsyncIterator[ServerSentEventMessage]:
    """Stored events after `after`, then new ones as they are committed, with heartbeats.

    New events are noticed at once when they are committed in this process or (PostgreSQL)
    announced by `NOTIFY` from another, and in any case by polling the `events` table every
    `events_poll_seconds`. While the stream is open, the conversation's awaiting client calls
    are kept from expiring.
    """
    settings = feeds.settings
    loop = asyncio.get_running_loop()
    keep_alive_every = max(0.05, settings.client_exec_timeout_seconds / 3)
    feeds.listen()
    cursor = after
    last_sent = loop.time()
    next_keep_alive = loop.time()
    yield ServerSentEventMessage(data=None, comment="connected", retry=RECONNECT_MS)
    while True:
        with feeds.notifier.watch_conversation(conversation_id) as changed:
            events = await feeds.events.events_after(principal, conversation_id, cursor, BATCH)
            for event in events:
                yield ServerSentEventMessage(
                    id=event.id, event=event.type, data=json.dumps(event.envelope(), default=str)
                )
                cursor = event.id
            now = loop.time()
            if events:
                last_sent = now
                if len(events) == BATCH:
                    continue
            if now >= next_keep_alive:
                await feeds.events.keep_client_calls_alive(conversation_id)
                next_keep_alive = now + keep_alive_every
            if now - last_sent >= settings.events_heartbeat_seconds:
                yield ServerSentEventMessage(data=None, comment="keep-alive")
                last_sent = now
            timeout = min(
                settings.events_poll_seconds,
                settings.events_heartbeat_seconds - (now - last_sent),
                next_keep_alive - now,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), max(0.0, timeout))


@get(
    "/v1/conversations/{conversation_id:uuid}/events",
    tags=["events"],
    media_type=STREAM,
    dependencies={**FEEDS, **services("conversations")},
)
async def conversation_events(
    conversation_id: FromPath[uuid.UUID],
    feeds: NamedDependency[EventFeeds],
    conversations: NamedDependency[ConversationService],
    principal: NamedDependency[Principal],
    last_event_id: LastEventId = None,
    after: After = None,
) -> ServerSentEvent:
    """The conversation's events as server-sent events, in order; reconnecting with `Last-Event-ID`
    (or `?after=`) delivers exactly what was missed. Each event's `id` is its stored id."""
    resume = _resume_from(last_event_id, after)
    await conversations.get_conversation(principal, conversation_id)
    return ServerSentEvent(ending_on_unreadable(stream_events(feeds, principal, conversation_id, resume)))


async def stream_pending_events(
    feeds: EventFeeds, principal: Principal, resume_after: int | None
) -> AsyncIterator[ServerSentEventMessage]:
    """Pending calls created and resolved in the caller's workspace (every workspace for an admin),
    as they are committed, with heartbeats.

    Woken at once by commits in this process and (PostgreSQL) by `NOTIFY sursis_pending` from
    others, and in any case by polling every `events_poll_seconds`. The `: connected` comment comes
    once the stream knows where it starts: a client that lists the awaiting calls after it misses
    nothing.
    """
    settings = feeds.settings
    loop = asyncio.get_running_loop()
    scope = feeds.events.pending_scope(principal)
    feeds.listen()
    cursor = await feeds.events.open_pending_feed(principal, resume_after, loop.time(), batch=BATCH)
    yield ServerSentEventMessage(data=None, comment="connected", retry=RECONNECT_MS)
    last_sent = loop.time()
    while True:
        with feeds.notifier.watch_pending(scope) as changed:
            events, more = await feeds.events.read_pending_feed(principal, cursor, loop.time(), batch=BATCH)
            for event in events:
                yield ServerSentEventMessage(
                    id=event.id, event=event.type, data=json.dumps(event.envelope(), default=str)
                )
            now = loop.time()
            if events:
                last_sent = now
            if more:
                continue
            if now - last_sent >= settings.events_heartbeat_seconds:
                yield ServerSentEventMessage(data=None, comment="keep-alive")
                last_sent = now
            timeout = min(settings.events_poll_seconds, settings.events_heartbeat_seconds - (now - last_sent))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), max(0.0, timeout))


@get("/v1/pending/events", tags=["events"], media_type=STREAM, dependencies=FEEDS)
async def pending_events(
    feeds: NamedDependency[EventFeeds],
    principal: NamedDependency[Principal],
    last_event_id: LastEventId = None,
    after: After = None,
) -> ServerSentEvent:
    """`pending.created` and `pending.resolved` events of the caller's workspace (admins: every
    workspace) as server-sent events, live; the envelope is the conversation stream's.

    Without `Last-Event-ID` (or `?after=`) the stream starts now: list `GET /v1/pending` after its
    `: connected` comment. Resuming delivers every event after that id, and again those of the last
    `events_settle_seconds` before it (ids are ordered per conversation only): dedupe by `id`.
    """
    resume = _resume_from(last_event_id, after) if last_event_id is not None or after is not None else None
    feeds.events.pending_scope(principal)
    return ServerSentEvent(ending_on_unreadable(stream_pending_events(feeds, principal, resume)))


class WebhookController(Controller):
    path = "/v1/webhooks"
    tags = ["webhooks"]
    dependencies = services("webhooks")

    @post("/", status_code=HTTP_201_CREATED, guards=[requires(Permission.MANAGE_WEBHOOKS)])
    async def create(
        self,
        data: JSONBody[CreateWebhook],
        webhooks: NamedDependency[WebhookService],
        principal: NamedDependency[Principal],
    ) -> WebhookCreatedOut:
        """Subscribe a URL to some of the workspace's events; the response shows the signing secret once."""
        webhook = await webhooks.create(principal, data.url, data.events, data.workspace)
        return webhook_created_out(webhook)

    @get("/")
    async def list_webhooks(
        self, webhooks: NamedDependency[WebhookService], principal: NamedDependency[Principal]
    ) -> list[WebhookOut]:
        """The webhooks of the caller's workspace (all of them for an admin), without secrets."""
        return [webhook_out(w) for w in await webhooks.list_webhooks(principal)]

    @delete("/{webhook_id:uuid}", status_code=HTTP_204_NO_CONTENT)
    async def remove(
        self,
        webhook_id: FromPath[uuid.UUID],
        webhooks: NamedDependency[WebhookService],
        principal: NamedDependency[Principal],
    ) -> None:
        """Delete a webhook; deliveries still queued for it are dropped."""
        await webhooks.delete(principal, webhook_id)


def event_route_handlers() -> list[Any]:
    return [conversation_events, pending_events, WebhookController]
