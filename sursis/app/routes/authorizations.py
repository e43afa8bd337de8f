"""Pre-approvals over the API: list, create and revoke them."""

from __future__ import annotations

import uuid

from litestar import Controller, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas import AuthorizationOut, CreateAuthorization, authorization_out
from sursis.domain.access import Permission
from sursis.domain.policy.authorizations import PreApprovalService
from sursis.domain.records import Principal


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
