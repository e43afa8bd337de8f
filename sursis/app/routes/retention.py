"""Retention over the API (admins only): policies, legal holds, plan and run, and the audit chain."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Controller, delete, get, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, PathParameter, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_204_NO_CONTENT

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas.retention import ChainOut, HoldIn, HoldOut, PolicyIn, PolicyOut, ReportOut
from sursis.app.schemas.validation import MAX_WORKSPACE_CHARS, WORKSPACE_PATTERN
from sursis.domain.access import Permission
from sursis.domain.audit.audit_chain import EXPECTED_HEAD_PATTERN, parse_expected_head
from sursis.domain.errors import ValidationFailed
from sursis.domain.records import Principal
from sursis.domain.retention.audit_verify import AuditChainService
from sursis.domain.retention.retention import RetentionPolicy, RetentionService

_NAME = {"min_length": 1, "max_length": MAX_WORKSPACE_CHARS, "pattern": WORKSPACE_PATTERN}
Workspace = Annotated[str | None, QueryParameter(description="One workspace; all by default", **_NAME)]
Expect = Annotated[
    str | None,
    QueryParameter(
        description="`SEQ:HASH`, a head recorded earlier outside the database (one workspace's): "
        "the chain must still hold it",
        pattern=EXPECTED_HEAD_PATTERN,
    ),
]
"""A workspace's name in the query: checked, and documented, by the parameter's own constraints."""
WorkspacePath = Annotated[str, PathParameter(**_NAME)]


class RetentionController(Controller):
    path = "/v1/retention"
    tags = ["retention"]
    dependencies = services("retention")
    guards = [requires(Permission.MANAGE_RETENTION)]

    @get("/policies/{workspace:str}")
    async def get_policy(
        self,
        workspace: WorkspacePath,
        retention: NamedDependency[RetentionService],
        principal: NamedDependency[Principal],
    ) -> PolicyOut:
        """A workspace's policy; without one, everything is kept (both periods null)."""
        return PolicyOut.model_validate(await retention.get_policy(principal, workspace))

    @put("/policies/{workspace:str}", status_code=HTTP_200_OK)
    async def set_policy(
        self,
        workspace: WorkspacePath,
        data: JSONBody[PolicyIn],
        retention: NamedDependency[RetentionService],
        principal: NamedDependency[Principal],
    ) -> PolicyOut:
        """Set (replace) a workspace's policy. The next sweeps purge what it makes due."""
        policy = RetentionPolicy(workspace, data.conversation_days, data.audit_days)
        return PolicyOut.model_validate(await retention.set_policy(principal, policy))

    @get("/plan")
    async def plan(
        self,
        retention: NamedDependency[RetentionService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
    ) -> list[ReportOut]:
        """What a run would purge now, per workspace and table; nothing is changed."""
        return [ReportOut.of(r) for r in await retention.plan(principal, workspace)]

    @post("/run", status_code=HTTP_200_OK)
    async def run(
        self,
        retention: NamedDependency[RetentionService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
    ) -> list[ReportOut]:
        """Purge now what the policies make due, in batches (one transaction each)."""
        return [ReportOut.of(r) for r in await retention.run(principal, workspace)]

    @get("/holds")
    async def list_holds(
        self,
        retention: NamedDependency[RetentionService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
    ) -> list[HoldOut]:
        """The legal holds in force."""
        return [HoldOut.model_validate(h) for h in await retention.list_holds(principal, workspace)]

    @post("/holds", status_code=HTTP_201_CREATED)
    async def add_hold(
        self,
        data: JSONBody[HoldIn],
        retention: NamedDependency[RetentionService],
        principal: NamedDependency[Principal],
    ) -> HoldOut:
        """Hold a conversation (or a whole workspace): nothing of it is purged, audit rows included,
        until the hold is released."""
        hold = await retention.add_hold(principal, data.workspace, data.conversation_id, data.reason)
        return HoldOut.model_validate(hold)

    @delete("/holds/{hold_id:uuid}", status_code=HTTP_204_NO_CONTENT)
    async def release_hold(
        self,
        hold_id: FromPath[uuid.UUID],
        retention: NamedDependency[RetentionService],
        principal: NamedDependency[Principal],
    ) -> None:
        """Release a hold: the policy applies again from the next sweep."""
        await retention.release_hold(principal, hold_id)


class AuditChainController(Controller):
    path = "/v1/audit/verify"
    tags = ["audit"]
    dependencies = services("audit_chain")
    guards = [requires(Permission.MANAGE_RETENTION)]

    @get("/")
    async def verify(
        self,
        audit_chain: NamedDependency[AuditChainService],
        principal: NamedDependency[Principal],
        workspace: Workspace = None,
        expect: Expect = None,
    ) -> list[ChainOut]:
        """Walk each workspace's audit chain from its anchor; each verdict names the first breach
        (a row edited, deleted, reordered or unreadable, an anchor moved without a purge, a signed
        checkpoint that does not hold, rows missing against the newest external checkpoint,
        back-dated rows, a chain without the `expect`ed head). Rows written since the last seal
        are counted, not checked."""
        head = None
        if expect is not None:
            if workspace is None:
                raise ValidationFailed("expect checks one workspace's chain: give workspace too")
            try:
                head = parse_expected_head(expect)
            except ValueError as exc:
                raise ValidationFailed(str(exc)) from None
        return [ChainOut.of(r) for r in await audit_chain.verify(workspace, expect=head)]


def retention_route_handlers() -> list[Any]:
    return [RetentionController, AuditChainController]
