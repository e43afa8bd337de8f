"""Pending calls over the API: list them, read one, decide one."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal, get_args

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from sursis.app.routes.provide import services
from sursis.app.routes.queries import Cursor, Wait, refuse_nul
from sursis.app.schemas import (
    PendingCallOut,
    PendingPage,
    ResolveBody,
    ResolvedOut,
    decode_cursor,
    pending_out,
    pending_page,
    resolved_out,
    run_out,
)
from sursis.domain.approvals.pending_calls import PendingCallService, Resolution
from sursis.domain.records import Principal
from sursis.domain.runs.runs import RunService
from sursis.domain.states import Decision, PendingStatus
from sursis.domain.tools import PendingKind

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
        queued_since = runs.mark()
        decided = await pending_calls.decide_pending(
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
        call = decided.call
        since = queued_since if decided.run_queued else None
        view = (
            await runs.wait_after_commit(principal, call.run_id, wait, queued_since=since)
            if wait > 0
            else None
        )
        return resolved_out(pending_out(call, principal), run_out(view, principal) if view else None)
