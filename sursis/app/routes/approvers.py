"""Who decides, over the API: approver groups and reassignment (admins), delegations (approvers)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Controller, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_204_NO_CONTENT

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas.approvers import (
    DelegationIn,
    DelegationOut,
    GroupIn,
    GroupName,
    GroupOut,
    KeyId,
    MemberIn,
    ReassignIn,
)
from sursis.app.schemas.pending import PendingCallOut, pending_out
from sursis.app.schemas.validation import WorkspaceName
from sursis.domain.access import Permission
from sursis.domain.approvals.approver_admin import ApproverService
from sursis.domain.records import Principal

Workspace = Annotated[
    WorkspaceName | None, QueryParameter(description="One workspace; the key's own by default")
]


class GroupController(Controller):
    path = "/v1/groups"
    tags = ["approvers"]
    dependencies = services("approvers")
    guards = [requires(Permission.MANAGE_APPROVERS)]

    @post("/", status_code=HTTP_201_CREATED)
    async def create_group(
        self,
        data: JSONBody[GroupIn],
        approvers: NamedDependency[ApproverService],
        principal: NamedDependency[Principal],
    ) -> GroupOut:
        """Make an approver group of API keys (operators or admins of its workspace)."""
        group = await approvers.create_group(
            principal, data.workspace, data.name, data.description, data.members
        )
        return GroupOut.of(group)

    @get("/")
    async def list_groups(
        self,
        approvers: NamedDependency[ApproverService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
    ) -> list[GroupOut]:
        """The approver groups with their members."""
        return [GroupOut.of(g) for g in await approvers.list_groups(principal, workspace)]

    @get("/{workspace:str}/{name:str}")
    async def show_group(
        self,
        workspace: FromPath[WorkspaceName],
        name: FromPath[GroupName],
        approvers: NamedDependency[ApproverService],
        principal: NamedDependency[Principal],
    ) -> GroupOut:
        return GroupOut.of(await approvers.get_group(principal, workspace, name))

    @post("/{workspace:str}/{name:str}/members", status_code=HTTP_200_OK)
    async def add_member(
        self,
        workspace: FromPath[WorkspaceName],
        name: FromPath[GroupName],
        data: JSONBody[MemberIn],
        approvers: NamedDependency[ApproverService],
        principal: NamedDependency[Principal],
    ) -> GroupOut:
        """Add a key to the group; adding a member again changes nothing."""
        return GroupOut.of(await approvers.add_member(principal, workspace, name, data.key_id))

    @delete("/{workspace:str}/{name:str}/members/{key_id:str}", status_code=HTTP_200_OK)
    async def remove_member(
        self,
        workspace: FromPath[WorkspaceName],
        name: FromPath[GroupName],
        key_id: FromPath[KeyId],
        approvers: NamedDependency[ApproverService],
        principal: NamedDependency[Principal],
    ) -> GroupOut:
        return GroupOut.of(await approvers.remove_member(principal, workspace, name, key_id))

    @delete("/{workspace:str}/{name:str}", status_code=HTTP_204_NO_CONTENT)
    async def delete_group(
        self,
        workspace: FromPath[WorkspaceName],
        name: FromPath[GroupName],
        approvers: NamedDependency[ApproverService],
        principal: NamedDependency[Principal],
    ) -> None:
        """Delete a group. Calls that name it wait for its other groups, an escalation or a reassignment."""
        await approvers.delete_group(principal, workspace, name)


class DelegationController(Controller):
    path = "/v1/delegations"
    tags = ["approvers"]
    dependencies = services("approvers")
    guards = [requires(Permission.APPROVE)]

    @post("/", status_code=HTTP_201_CREATED)
    async def create_delegation(
        self,
        data: JSONBody[DelegationIn],
        approvers: NamedDependency[ApproverService],
        principal: NamedDependency[Principal],
    ) -> DelegationOut:
        """Name a delegate who votes for you (an admin: for `delegator`) until `ends_at` (90 days at most)."""
        made = await approvers.delegate(
            principal,
            delegate=data.delegate,
            ends_at=data.ends_at,
            starts_at=data.starts_at,
            delegator=data.delegator,
        )
        return DelegationOut.model_validate(made)

    @get("/")
    async def list_delegations(
        self, approvers: NamedDependency[ApproverService], principal: NamedDependency[Principal]
    ) -> list[DelegationOut]:
        """Delegations you gave or received (an admin: all of its workspaces)."""
        return [DelegationOut.model_validate(d) for d in await approvers.list_delegations(principal)]

    @delete("/{delegation_id:uuid}", status_code=HTTP_200_OK)
    async def revoke_delegation(
        self,
        delegation_id: FromPath[uuid.UUID],
        approvers: NamedDependency[ApproverService],
        principal: NamedDependency[Principal],
    ) -> DelegationOut:
        """End a delegation now; revoking it again changes nothing."""
        return DelegationOut.model_validate(await approvers.revoke_delegation(principal, delegation_id))


@post(
    "/v1/pending/{correlation_id:uuid}/reassign",
    status_code=HTTP_200_OK,
    tags=["pending"],
    dependencies=services("approvers"),
    guards=[requires(Permission.MANAGE_APPROVERS)],
)
async def reassign_pending(
    correlation_id: FromPath[uuid.UUID],
    data: JSONBody[ReassignIn],
    approvers: NamedDependency[ApproverService],
    principal: NamedDependency[Principal],
) -> PendingCallOut:
    """Put a waiting call routed to approver groups before other groups or keys (admins): they
    replace who may vote; votes already cast stay counted."""
    return pending_out(await approvers.reassign(principal, correlation_id, data.to), principal)


def approver_route_handlers() -> list[Any]:
    return [GroupController, DelegationController, reassign_pending]
