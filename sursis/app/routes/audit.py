"""The audit log over the API: its rows by conversation, call, action and time, a page at a time."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.openapi.spec import Schema
from litestar.openapi.spec.enums import OpenAPIType
from litestar.params import FromQuery, QueryParameter

from sursis.app.routes.provide import services
from sursis.app.routes.queries import TIMESTAMP_PATTERN, Cursor, parse_timestamp, query_error, refuse_nul
from sursis.app.schemas import AuditPage, audit_page, decode_audit_cursor
from sursis.domain.audit.audit import AuditService
from sursis.domain.records import AuditQuery, Principal

MAX_AUDIT_ACTIONS = 20
MAX_ACTION_CHARS = 100
# Each `action` is checked in the handler (Litestar checks only the list's length); the document
# says the same from these constants.
ACTION_SCHEMA = Schema(type=OpenAPIType.STRING, min_length=1, max_length=MAX_ACTION_CHARS)


class AuditController(Controller):
    path = "/v1/audit"
    tags = ["audit"]
    dependencies = services("audit")

    @get("/")
    async def list_audit(
        self,
        audit: NamedDependency[AuditService],
        principal: NamedDependency[Principal],
        conversation_id: FromQuery[uuid.UUID | None] = None,
        correlation_id: FromQuery[uuid.UUID | None] = None,
        action: Annotated[
            list[str] | None,
            QueryParameter(
                max_items=MAX_AUDIT_ACTIONS,
                description=f"Repeat: any of (each 1-{MAX_ACTION_CHARS} characters)",
                schema_extra={"items": ACTION_SCHEMA},
            ),
        ] = None,
        since: Annotated[
            str | None,
            QueryParameter(
                pattern=TIMESTAMP_PATTERN,
                description="Rows written at or after this RFC 3339 timestamp (with a time zone)",
                schema_extra={"format": "date-time"},
            ),
        ] = None,
        order: Annotated[Literal["asc", "desc"], QueryParameter(description="`desc`: newest first")] = "asc",
        cursor: Cursor = None,
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 100,
    ) -> AuditPage:
        """Audit rows in the order they were written, or newest first with `order=desc`
        (operators: their workspace; admins: all).

        `action` is e.g. `pending.approved` (repeat it to match any of several); `since` an ISO 8601
        timestamp with a time zone. `actor_name` is the name of the API key that acted, if a key did.
        """
        since_at = parse_timestamp("since", since) if since is not None else None
        actions = tuple(action or ())
        if any(not 1 <= len(a) <= MAX_ACTION_CHARS for a in actions):
            raise query_error("action", f"an action is 1-{MAX_ACTION_CHARS} characters", "invalid action")
        refuse_nul("action", actions)
        page = await audit.list_audit(
            principal,
            AuditQuery(
                conversation_id=conversation_id,
                correlation_id=correlation_id,
                actions=actions,
                since=since_at,
                after_id=decode_audit_cursor(cursor) if cursor else None,
                limit=limit,
                newest_first=order == "desc",
            ),
        )
        return audit_page(page)
