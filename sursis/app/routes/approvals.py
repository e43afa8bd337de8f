"""Approval requests from agents Sursis does not host: file one, wait for its decision, consume
the approval once, report the outcome. The decision itself is `POST /v1/pending/{id}/resolve`."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.routes.queries import Wait
from sursis.app.schemas.approvals import (
    ApprovalRequestOut,
    ConsumeApproval,
    FileApproval,
    ReportOutcome,
    approval_out,
)
from sursis.domain.access import Permission
from sursis.domain.approvals.approval_request_records import Filing, Outcome
from sursis.domain.approvals.approval_requests import ApprovalRequestService
from sursis.domain.clock import utcnow
from sursis.domain.records import Principal

FILE = requires(Permission.CONVERSE)


class ApprovalController(Controller):
    path = "/v1/approvals"
    tags = ["approvals"]
    dependencies = services("approvals")

    @post("/", status_code=HTTP_201_CREATED, guards=[FILE])
    async def file(
        self,
        data: JSONBody[FileApproval],
        approvals: NamedDependency[ApprovalRequestService],
        principal: NamedDependency[Principal],
    ) -> Response[ApprovalRequestOut]:
        """File a call for a decision: 201 with its correlation id, or 200 with the request filed
        before under the same `idempotency_key`. The policy point may settle it at once (allow,
        deny, a pre-approval); otherwise it waits in the inbox as a pending call."""
        found = await approvals.file(
            principal,
            Filing(
                tool_name=data.tool_name,
                args=data.args,
                agent=data.agent,
                expires_in=timedelta(seconds=data.expires_in_seconds),
                conversation=data.conversation,
                idempotency_key=data.idempotency_key,
                digest=data.digest,
                workspace=data.workspace,
                description=data.description,
            ),
        )
        status = HTTP_201_CREATED if found.created else HTTP_200_OK
        return Response(approval_out(found, principal, utcnow()), status_code=status)

    @get("/abandoned")
    async def abandoned(
        self,
        approvals: NamedDependency[ApprovalRequestService],
        principal: NamedDependency[Principal],
        limit: Annotated[int, QueryParameter(ge=1, le=200)] = 50,
    ) -> list[ApprovalRequestOut]:
        """Approved requests whose agent neither consumed them nor reported an outcome before they
        expired (or consumed and never reported): nobody can tell whether their action ran."""
        now = utcnow()
        return [approval_out(found, principal, now) for found in await approvals.abandoned(principal, limit)]

    @get("/{correlation_id:uuid}")
    async def detail(
        self,
        correlation_id: FromPath[uuid.UUID],
        approvals: NamedDependency[ApprovalRequestService],
        principal: NamedDependency[Principal],
        wait: Wait = 0,
    ) -> ApprovalRequestOut:
        """The request; `?wait=` long-polls until it is decided (or the wait ends)."""
        found = await approvals.get(principal, correlation_id, wait)
        return approval_out(found, principal, utcnow())

    @post("/{correlation_id:uuid}/consume", status_code=HTTP_200_OK, guards=[FILE])
    async def consume(
        self,
        correlation_id: FromPath[uuid.UUID],
        data: JSONBody[ConsumeApproval],
        approvals: NamedDependency[ApprovalRequestService],
        principal: NamedDependency[Principal],
    ) -> ApprovalRequestOut:
        """Take the approval, once, presenting the digest of the action about to run: 409
        `already_consumed` the second time, `digest_mismatch` for another action, `approval_expired`
        after the expiry, `not_approved` unless it was approved; 403 `not_requester` for another key."""
        found = await approvals.consume(principal, correlation_id, data.digest)
        return approval_out(found, principal, utcnow())

    @post("/{correlation_id:uuid}/outcome", status_code=HTTP_200_OK, guards=[FILE])
    async def outcome(
        self,
        correlation_id: FromPath[uuid.UUID],
        data: JSONBody[ReportOutcome],
        approvals: NamedDependency[ApprovalRequestService],
        principal: NamedDependency[Principal],
    ) -> ApprovalRequestOut:
        """Report what became of a consumed approval (ran, failed, not run), once."""
        found = await approvals.report(principal, correlation_id, Outcome(data.outcome), data.detail)
        return approval_out(found, principal, utcnow())
