"""Workspace policies (admins), their simulation and Cedar schema, and the autonomy ladder."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, get, post, put
from litestar.di import NamedDependency
from litestar.params import JSONBody, Parameter, QueryParameter
from litestar.status_codes import HTTP_200_OK

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas.policies import (
    ApprovalPolicyIn,
    ApprovalPolicyOut,
    LadderIn,
    LadderOut,
    PolicyToolOut,
    SimulateIn,
    SimulationOut,
)
from sursis.app.schemas.validation import MAX_WORKSPACE_CHARS, WORKSPACE_PATTERN
from sursis.domain.access import Permission
from sursis.domain.clock import utcnow
from sursis.domain.errors import ValidationFailed
from sursis.domain.policy.policy_service import PolicyService
from sursis.domain.policy.policy_simulation import PolicySimulation
from sursis.domain.records import Principal

Workspace = Annotated[
    str | None,
    QueryParameter(
        min_length=1,
        max_length=MAX_WORKSPACE_CHARS,
        pattern=WORKSPACE_PATTERN,
        description="The caller's workspace by default",
    ),
]
Version = Annotated[
    int | None, QueryParameter(ge=1, le=2**31 - 1, description="A past version; the current by default")
]


class PolicyController(Controller):
    path = "/v1/policies"
    tags = ["policies"]
    dependencies = services("policies", "policy_simulation")
    guards = [requires(Permission.MANAGE_POLICIES)]

    @get("/")
    async def get_policy(
        self,
        policies: NamedDependency[PolicyService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
        version: Version = None,
    ) -> ApprovalPolicyOut:
        """The workspace's current policy (version null: none stored, the defaults apply), or with
        `version`, that stored version (404 `not_found` if there is no such version)."""
        ws = PolicyService.workspace_of(principal, workspace)
        return ApprovalPolicyOut.of(ws, await policies.get(principal, ws, version))

    @get("/versions/{version:str}")
    async def get_version(
        self,
        version: Annotated[str, Parameter(pattern=r"^[1-9][0-9]{0,8}$", description="1, 2, ...")],
        policies: NamedDependency[PolicyService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
    ) -> ApprovalPolicyOut:
        """One stored version of the workspace's policy (404 if there is no such version)."""
        ws = PolicyService.workspace_of(principal, workspace)
        return ApprovalPolicyOut.of(ws, await policies.get(principal, ws, int(version)))

    @put("/", status_code=HTTP_200_OK)
    async def set_policy(
        self,
        data: JSONBody[ApprovalPolicyIn],
        policies: NamedDependency[PolicyService],
        principal: NamedDependency[Principal],
    ) -> ApprovalPolicyOut:
        """Store the rules as the workspace's next version; it decides calls from then on."""
        stored = await policies.put(
            principal,
            data.workspace,
            [r.to_rule() for r in data.rules],
            data.comment,
            data.expected_version,
        )
        return ApprovalPolicyOut.of(stored.workspace, stored)

    @post("/simulate", status_code=HTTP_200_OK)
    async def simulate(
        self,
        data: JSONBody[SimulateIn],
        policy_simulation: NamedDependency[PolicySimulation],
        principal: NamedDependency[Principal],
    ) -> SimulationOut:
        """Replay the period's recorded calls against proposed rules: what would have changed."""
        until = data.until or utcnow()
        if until <= data.since:
            raise ValidationFailed(
                "until must be after since", extra={"errors": [{"loc": ["until"], "msg": "not after since"}]}
            )
        report = await policy_simulation.simulate(
            principal,
            data.workspace,
            [r.to_rule() for r in data.rules],
            data.since,
            until,
            data.examples,
            reviewer_model=data.reviewer_model,
            max_reviews=data.max_reviews,
        )
        return SimulationOut.model_validate(report.to_json())

    @get("/schema")
    async def schema(
        self, policies: NamedDependency[PolicyService], principal: NamedDependency[Principal]
    ) -> dict[str, Any]:
        """The Cedar schema (JSON form) conditions are checked against: one action per tool."""
        return policies.schema(principal)

    @get("/tools")
    async def tools(
        self,
        policies: NamedDependency[PolicyService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
    ) -> list[PolicyToolOut]:
        """The tool catalog as the policy sees it: category, MCP server, schema digest, the digest
        the policy pins, and `schema_changed` when they differ."""
        return [PolicyToolOut.of(t) for t in await policies.catalog(principal, workspace)]


class LadderController(Controller):
    path = "/v1/ladder"
    tags = ["policies"]
    dependencies = services("policies")
    guards = [requires(Permission.MOVE_LADDER)]

    @get("/")
    async def get_ladder(
        self,
        policies: NamedDependency[PolicyService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
    ) -> list[LadderOut]:
        """Every tool's place on the workspace's autonomy ladder, with its ceiling."""
        return [LadderOut.of(e) for e in await policies.ladder(principal, workspace)]

    @put("/", status_code=HTTP_200_OK)
    async def move(
        self,
        data: JSONBody[LadderIn],
        policies: NamedDependency[PolicyService],
        principal: NamedDependency[Principal],
    ) -> LadderOut:
        """Move a tool on the ladder within its ceiling (403 `above_ceiling` beyond it); admins
        also set the ceiling, and for an `ask_above` ceiling its condition (a user's condition only
        adds asks to it)."""
        entry = await policies.move(
            principal,
            data.workspace,
            data.tool,
            level=data.level,
            condition=data.condition,
            ceiling=data.ceiling,
            ceiling_condition=data.ceiling_condition,
            undo=data.undo,
            one_in=data.one_in,
            ceiling_one_in=data.ceiling_one_in,
        )
        return LadderOut.of(entry)


def policy_route_handlers() -> list[Any]:
    return [PolicyController, LadderController]
