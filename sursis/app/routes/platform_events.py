"""`POST /v1/events`: domain events from the rest of the platform (a `system` key)."""

from __future__ import annotations

from typing import Annotated

from litestar import Response, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_202_ACCEPTED

from sursis.app.auth import INGEST, requires
from sursis.app.routes.provide import services
from sursis.app.schemas.pending import decode_cursor, encode_cursor
from sursis.app.schemas.platform_events import (
    ConversationList,
    EventAccepted,
    EventIn,
    event_accepted,
    listed_conversation_out,
    platform_event,
)
from sursis.app.schemas.validation import (
    CURSOR_PATTERN,
    MAX_CURSOR_CHARS,
    MAX_WORKSPACE_CHARS,
    WORKSPACE_PATTERN,
)
from sursis.domain.access import Permission
from sursis.domain.customer.intake import EventIntakeService
from sursis.domain.records import Principal

Cursor = Annotated[
    str | None,
    QueryParameter(
        pattern=CURSOR_PATTERN, max_length=MAX_CURSOR_CHARS, description="`next_cursor` of the previous page"
    ),
]


@post(
    "/v1/events",
    tags=["events"],
    status_code=HTTP_202_ACCEPTED,
    dependencies=services("intake"),
    guards=[requires(Permission.POST_EVENTS)],
    opt={INGEST: True},
    responses={HTTP_200_OK: ResponseSpec(EventAccepted, description="Posted before: `duplicate` is true")},
)
async def post_event(
    data: JSONBody[EventIn],
    intake: NamedDependency[EventIntakeService],
    principal: NamedDependency[Principal],
) -> Response[EventAccepted]:
    """Take one domain event: `scan.completed`, `anomaly.detected` or `workspace.config_changed`.

    The event, the rows it carries and, when it warrants one, a conversation of the `customer`
    agent with its first run queued are stored in one transaction. Posting an id again changes
    nothing and answers 200 with `duplicate: true`; a new event answers 202. Events are limited
    per key by `SURSIS_EVENTS_RATE_LIMIT_PER_MINUTE`, apart from the key's other requests (429 with
    `Retry-After` beyond).
    """
    workspace = intake.workspace_for(principal, data.workspace)
    received = await intake.receive(principal, platform_event(data, workspace))
    await intake.notify(received)
    return Response(
        event_accepted(received), status_code=HTTP_200_OK if received.duplicate else HTTP_202_ACCEPTED
    )


@get("/v1/conversations", tags=["conversations"], dependencies=services("intake"))
async def list_conversations(
    intake: NamedDependency[EventIntakeService],
    principal: NamedDependency[Principal],
    limit: Annotated[int, QueryParameter(ge=1, le=200)] = 50,
    workspace: Annotated[
        str | None,
        QueryParameter(min_length=1, max_length=MAX_WORKSPACE_CHARS, pattern=WORKSPACE_PATTERN),
    ] = None,
    cursor: Cursor = None,
) -> ConversationList:
    """The newest conversations of the caller's workspace (admins: every workspace, or `?workspace=`),
    newest first; those that platform events started have `initiator: system` and their `event`.
    `next_cursor` (null on the last page) fetches the next page."""
    page = await intake.recent_conversations(
        principal, workspace, limit, decode_cursor(cursor) if cursor else None
    )
    return ConversationList(
        items=[listed_conversation_out(item) for item in page.items],
        next_cursor=encode_cursor(page.next_cursor) if page.next_cursor else None,
    )
