"""HTTP API v1: conversations, runs, pending calls, audit, pre-approvals and keys.

Every route here sits behind the API-key middleware (`sursis.app.auth`); what each role may do
is decided in the domain services, never here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from litestar import Controller, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import Schema
from litestar.openapi.spec.enums import OpenAPIType
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_202_ACCEPTED

from sursis.app.auth import requires
from sursis.app.routes.agents import list_agents
from sursis.app.routes.approvers import approver_route_handlers
from sursis.app.routes.channels_admin import channel_route_handlers
from sursis.app.routes.events import event_route_handlers
from sursis.app.routes.fork import fork_route_handlers
from sursis.app.routes.mcp_pins import mcp_route_handlers
from sursis.app.routes.platform_events import list_conversations, post_event
from sursis.app.routes.policies import policy_route_handlers
from sursis.app.routes.provide import services
from sursis.app.routes.retention import retention_route_handlers
from sursis.app.routes.worlds import world_route_handlers
from sursis.app.schemas import (
    CURSOR_PATTERN,
    MAX_CURSOR_CHARS,
    ApiKeyOut,
    AuditPage,
    AuthorizationOut,
    ConversationDetailOut,
    ConversationOut,
    CreateAuthorization,
    CreateConversation,
    CreateKey,
    IssuedKeyOut,
    PendingCallOut,
    PendingPage,
    PostMessage,
    PrincipalOut,
    ResolveBody,
    ResolvedOut,
    RunOut,
    ToolCallOut,
    api_key_out,
    as_utc,
    audit_page,
    authorization_out,
    conversation_detail_out,
    conversation_out,
    decode_audit_cursor,
    decode_cursor,
    issued_key_out,
    pending_out,
    pending_page,
    principal_out,
    resolved_out,
    run_out,
    tool_call_out,
)
from sursis.domain.access import Permission
from sursis.domain.audit import AuditQuery, AuditService
from sursis.domain.authorizations import PreApprovalService
from sursis.domain.conversations import ConversationService
from sursis.domain.errors import ValidationFailed
from sursis.domain.keys import KeyService
from sursis.domain.pending_calls import PendingCallService, Resolution
from sursis.domain.records import Principal
from sursis.domain.runs import RunService
from sursis.domain.states import Decision, PendingStatus
from sursis.domain.tools import PendingKind

Wait = Annotated[float, QueryParameter(ge=0, le=3600, description="Long-poll up to this many seconds")]
Cursor = Annotated[
    str | None,
    QueryParameter(
        pattern=CURSOR_PATTERN,
        max_length=MAX_CURSOR_CHARS,
        description="`next_cursor` of the previous page",
    ),
]
MAX_AUDIT_ACTIONS = 20
MAX_ACTION_CHARS = 100
# Each `action` is checked in the handler (Litestar checks only the list's length); the document
# says the same from these constants.
ACTION_SCHEMA = Schema(type=OpenAPIType.STRING, min_length=1, max_length=MAX_ACTION_CHARS)


def query_error(name: str, message: str, msg: str) -> ValidationFailed:
    return ValidationFailed(message, extra={"errors": [{"loc": ["query", name], "msg": msg}]})


# RFC 3339 `date-time`: a date, a time and a time zone; not a bare date, a number or an epoch.
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})$"


def parse_timestamp(name: str, value: str) -> datetime:
    """A query timestamp already shaped by `TIMESTAMP_PATTERN`, as an aware UTC time (422 if the
    date or time does not exist, like February 30th)."""
    try:
        return as_utc(datetime.fromisoformat(value))
    except ValueError as exc:
        raise query_error(name, f"{name} is not a valid time", "not a valid RFC 3339 date-time") from exc


def refuse_nul(name: str, values: Sequence[str | None]) -> None:
    """A NUL character in a query string is refused like one in a body (PostgreSQL cannot compare it)."""
    if any("\x00" in value for value in values if value is not None):
        raise query_error(name, f"{name} must not contain a NUL character", "contains a NUL character")


@get("/v1/me", tags=["keys"])
async def me(principal: NamedDependency[Principal]) -> PrincipalOut:
    """Who the presented key is: its id, name, role, workspace and what the role may do."""
    return principal_out(principal)


class ConversationController(Controller):
    path = "/v1/conversations"
    tags = ["conversations"]
    dependencies = services("conversations", "runs")

    @post("/", status_code=HTTP_201_CREATED)
    async def create(
        self,
        data: JSONBody[CreateConversation],
        conversations: NamedDependency[ConversationService],
        principal: NamedDependency[Principal],
    ) -> ConversationOut:
        """Start a conversation with an agent."""
        conversation = await conversations.create_conversation(principal, data.agent, data.workspace)
        return conversation_out(conversation)

    @get("/{conversation_id:uuid}")
    async def detail(
        self,
        conversation_id: FromPath[uuid.UUID],
        conversations: NamedDependency[ConversationService],
        principal: NamedDependency[Principal],
    ) -> ConversationDetailOut:
        """The conversation, its message log and its active run."""
        detail = await conversations.conversation_detail(principal, conversation_id)
        return conversation_detail_out(detail, principal)

    @post(
        "/{conversation_id:uuid}/messages",
        status_code=HTTP_202_ACCEPTED,
        responses={HTTP_200_OK: ResponseSpec(RunOut, description="The run settled within `wait` seconds")},
    )
    async def post_message(
        self,
        conversation_id: FromPath[uuid.UUID],
        data: JSONBody[PostMessage],
        conversations: NamedDependency[ConversationService],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
        wait: Wait = 0,
    ) -> Response[RunOut]:
        """Post a user message; its run is queued. `?wait=` long-polls until the run settles.

        Once the message is committed the answer is never an error: if the database cannot be
        read while waiting (busy pool, outage), the queued run comes back with 202.
        """
        run = await conversations.post_message(principal, conversation_id, data.content)
        view = await runs.wait_after_queueing(principal, run, wait)
        status = HTTP_200_OK if view.run.status.settled else HTTP_202_ACCEPTED
        return Response(run_out(view, principal), status_code=status)


class RunController(Controller):
    path = "/v1/runs"
    tags = ["runs"]
    dependencies = services("runs")

    @get("/{run_id:uuid}")
    async def detail(
        self,
        run_id: FromPath[uuid.UUID],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
        wait: Wait = 0,
    ) -> RunOut:
        """A run with its awaiting pending calls. `?wait=` long-polls until it settles."""
        return run_out(await runs.wait_for_run(principal, run_id, wait), principal)

    @get("/{run_id:uuid}/tool-calls")
    async def tool_calls(
        self,
        run_id: FromPath[uuid.UUID],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
    ) -> list[ToolCallOut]:
        """The executed tool calls of a run, with their metadata, in order."""
        return [tool_call_out(r) for r in await runs.list_tool_calls(principal, run_id)]

    @post("/{run_id:uuid}/cancel", status_code=HTTP_200_OK)
    async def cancel(
        self,
        run_id: FromPath[uuid.UUID],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
    ) -> RunOut:
        """Cancel a run; its awaiting calls become `cancelled` and the conversation is free again."""
        return run_out(await runs.cancel_run(principal, run_id), principal)


PendingStatusFilter = Literal[
    "awaiting", "approved", "denied", "revision_requested", "answered", "expired", "cancelled", "all"
]
"""A pending call's status, or `all` (one literal: a query parameter's union may hold one string type)."""
assert set(get_args(PendingStatusFilter)) == {*PendingStatus, "all"}


class PendingController(Controller):
    path = "/v1/pending"
    tags = ["pending"]
    dependencies = services("pending_calls")

    @get("/")
    async def list_pending(
        self,
        pending_calls: NamedDependency[PendingCallService],
        principal: NamedDependency[Principal],
        status: FromQuery[PendingStatusFilter] = "awaiting",
        kind: FromQuery[PendingKind | None] = None,
        tool_name: FromQuery[str | None] = None,
        cursor: Cursor = None,
        limit: Annotated[int, QueryParameter(ge=1, le=200)] = 50,
    ) -> PendingPage:
        """Pending calls of the caller's workspace, newest first; `status=all`: of every status."""
        refuse_nul("tool_name", [tool_name])
        page = await pending_calls.list_pending(
            principal,
            status=None if status == "all" else PendingStatus(status),
            kind=kind,
            tool_name=tool_name,
            after=decode_cursor(cursor) if cursor else None,
            limit=limit,
        )
        return pending_page(page, principal)

    @get("/{correlation_id:uuid}")
    async def detail(
        self,
        correlation_id: FromPath[uuid.UUID],
        pending_calls: NamedDependency[PendingCallService],
        principal: NamedDependency[Principal],
    ) -> PendingCallOut:
        return pending_out(await pending_calls.get_pending(principal, correlation_id), principal)

    @post("/{correlation_id:uuid}/resolve", status_code=HTTP_200_OK, dependencies=services("runs"))
    async def resolve(
        self,
        correlation_id: FromPath[uuid.UUID],
        data: JSONBody[ResolveBody],
        pending_calls: NamedDependency[PendingCallService],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
        wait: Wait = 0,
    ) -> ResolvedOut:
        """Decide a pending call. Answered once the decision is committed; the run resumes in a worker.

        `?wait=` long-polls until the call's run settles (its next suspension or its end) and
        answers with it in `run`: one request instead of a resolve and a `GET /v1/runs/{id}?wait=`.
        Once the decision is committed the answer is never an error: if the run cannot be read
        while waiting, `run` is null.
        """
        call = await pending_calls.resolve_pending(
            principal,
            correlation_id,
            Resolution(
                decision=Decision(data.decision),
                reason=data.reason,
                args=data.args,
                result=data.result,
                args_hash=data.args_hash,
            ),
        )
        view = await runs.wait_after_commit(principal, call.run_id, wait) if wait > 0 else None
        return resolved_out(pending_out(call, principal), run_out(view, principal) if view else None)


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


class AuthorizationController(Controller):
    path = "/v1/authorizations"
    tags = ["authorizations"]
    dependencies = services("authorizations")

    @get("/")
    async def list_authorizations(
        self,
        authorizations: NamedDependency[PreApprovalService],
        principal: NamedDependency[Principal],
        include_inactive: FromQuery[bool] = False,
    ) -> list[AuthorizationOut]:
        """Pre-approvals of the caller's workspace; expired and revoked ones with `include_inactive`."""
        found = await authorizations.list_authorizations(principal, include_inactive=include_inactive)
        return [authorization_out(a) for a in found]

    @post("/", status_code=HTTP_201_CREATED, guards=[requires(Permission.MANAGE_AUTHORIZATIONS)])
    async def create(
        self,
        data: JSONBody[CreateAuthorization],
        authorizations: NamedDependency[PreApprovalService],
        principal: NamedDependency[Principal],
    ) -> AuthorizationOut:
        """Pre-approve a gated tool in a workspace, optionally only for matching argument values."""
        authorization = await authorizations.create(
            principal,
            tool_name=data.tool_name,
            reason=data.reason,
            args_match=data.args_match,
            expires_at=data.expires_at,
            workspace=data.workspace,
        )
        return authorization_out(authorization)

    @delete("/{authorization_id:uuid}", status_code=HTTP_200_OK)
    async def revoke(
        self,
        authorization_id: FromPath[uuid.UUID],
        authorizations: NamedDependency[PreApprovalService],
        principal: NamedDependency[Principal],
    ) -> AuthorizationOut:
        """Revoke a pre-approval: calls are gated again from now on."""
        return authorization_out(await authorizations.revoke(principal, authorization_id))


class KeyController(Controller):
    path = "/v1/keys"
    tags = ["keys"]
    dependencies = services("keys")

    @get("/")
    async def list_keys(
        self,
        keys: NamedDependency[KeyService],
        principal: NamedDependency[Principal],
        include_revoked: FromQuery[bool] = False,
    ) -> list[ApiKeyOut]:
        """API keys (admins); never the keys themselves, only their prefixes."""
        return [api_key_out(k) for k in await keys.list_keys(principal, include_revoked=include_revoked)]

    @post("/", status_code=HTTP_201_CREATED, guards=[requires(Permission.MANAGE_KEYS)])
    async def create(
        self,
        data: JSONBody[CreateKey],
        keys: NamedDependency[KeyService],
        principal: NamedDependency[Principal],
    ) -> IssuedKeyOut:
        """Make a key (admins). The response is the only place the key is ever shown."""
        issued = await keys.create(
            principal, role=data.role, workspace=data.workspace, name=data.name, expires_at=data.expires_at
        )
        return issued_key_out(issued)

    @delete("/{key_id:uuid}", status_code=HTTP_200_OK)
    async def revoke(
        self,
        key_id: FromPath[uuid.UUID],
        keys: NamedDependency[KeyService],
        principal: NamedDependency[Principal],
    ) -> ApiKeyOut:
        """Revoke a key (admins); it is refused from the next request on."""
        return api_key_out(await keys.revoke(principal, key_id))


def route_handlers() -> list[Any]:
    return [
        me,
        list_agents,
        ConversationController,
        *fork_route_handlers(),
        RunController,
        PendingController,
        AuditController,
        *event_route_handlers(),
        AuthorizationController,
        KeyController,
        *world_route_handlers(),
        *channel_route_handlers(),
        *retention_route_handlers(),
        *policy_route_handlers(),
        *approver_route_handlers(),
        *mcp_route_handlers(),
        post_event,
        list_conversations,
    ]
