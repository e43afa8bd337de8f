"""HTTP API of the worlds context: worlds, decisions and flags, the rule corpus, World Agent sessions."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, TypeVar

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from sursis.app.routes.provide import service
from sursis.app.routes.world_models import (
    CreateWorld,
    DecisionOut,
    FlagDecision,
    FlagOut,
    RecordDecision,
    RuleHistoryOut,
    RuleOut,
    RulePage,
    WorldOut,
    WorldPage,
    WorldSessionOut,
    world_out,
)
from sursis.app.schemas import conversation_out
from sursis.domain.records import Principal
from sursis.domain.worlds.rules import RuleState
from sursis.infra.worlds.service import WorldService

T = TypeVar("T")


class WorldController(Controller):
    path = "/v1/worlds"
    tags = ["worlds"]
    dependencies = {"worlds": service("worlds.service")}

    @post("/", status_code=HTTP_201_CREATED)
    async def create(
        self,
        data: JSONBody[CreateWorld],
        worlds: NamedDependency[WorldService],
        principal: NamedDependency[Principal],
    ) -> WorldOut:
        """Create the world of a (workspace, domain); admins only, one per pair (409 `world_exists`)."""
        world = await worlds.create_world(principal, data.domain, data.title, data.workspace)
        return world_out(world)

    @get("/")
    async def list_worlds(
        self, worlds: NamedDependency[WorldService], principal: NamedDependency[Principal]
    ) -> WorldPage:
        """The worlds the key can see."""
        return WorldPage(items=[world_out(w) for w in await worlds.list_worlds(principal)])

    @get("/{world_id:uuid}")
    async def detail(
        self,
        world_id: FromPath[uuid.UUID],
        worlds: NamedDependency[WorldService],
        principal: NamedDependency[Principal],
    ) -> WorldOut:
        return world_out(await worlds.get_world(principal, world_id))

    @post(
        "/{world_id:uuid}/decisions",
        status_code=HTTP_201_CREATED,
        responses={HTTP_200_OK: ResponseSpec(DecisionOut, description="Recorded before with this body")},
    )
    async def record_decision(
        self,
        world_id: FromPath[uuid.UUID],
        data: JSONBody[RecordDecision],
        worlds: NamedDependency[WorldService],
        principal: NamedDependency[Principal],
    ) -> Response[DecisionOut]:
        """Record a decision (201); the same id and body again answers 200, another body 409."""
        recorded = await worlds.record_decision(
            principal, world_id, data.id, data.rule_ids, data.context, data.outcome
        )
        return _recorded(DecisionOut.of(recorded.value), created=recorded.created)

    @post(
        "/{world_id:uuid}/decisions/{decision_id:str}/flags",
        status_code=HTTP_201_CREATED,
        responses={HTTP_200_OK: ResponseSpec(FlagOut, description="Flagged before with this id")},
    )
    async def flag_decision(
        self,
        world_id: FromPath[uuid.UUID],
        decision_id: FromPath[str],
        data: JSONBody[FlagDecision],
        worlds: NamedDependency[WorldService],
        principal: NamedDependency[Principal],
    ) -> Response[FlagOut]:
        """Flag a decision (review request or noteworthy), idempotent on the flag's id."""
        recorded = await worlds.flag_decision(
            principal, world_id, decision_id, data.id, data.kind, data.reason
        )
        return _recorded(FlagOut.of(recorded.value), created=recorded.created)

    @get("/{world_id:uuid}/rules")
    async def rules(
        self,
        world_id: FromPath[uuid.UUID],
        worlds: NamedDependency[WorldService],
        principal: NamedDependency[Principal],
        rule_state: Annotated[RuleState | None, QueryParameter(name="state")] = None,
    ) -> RulePage:
        """The rule corpus, every version, optionally of one state (`?state=`)."""
        rules = await worlds.list_rules(principal, world_id, rule_state)
        return RulePage(items=[RuleOut.of(r) for r in rules])

    @get("/{world_id:uuid}/rules/{rule_id:uuid}")
    async def rule(
        self,
        world_id: FromPath[uuid.UUID],
        rule_id: FromPath[uuid.UUID],
        worlds: NamedDependency[WorldService],
        principal: NamedDependency[Principal],
    ) -> RuleHistoryOut:
        """One rule with all its versions: the conformity view (predicate, tests, gate, citations)."""
        versions = await worlds.get_rule(principal, world_id, rule_id)
        return RuleHistoryOut(rule_id=rule_id, versions=[RuleOut.of(v) for v in versions])

    @post("/{world_id:uuid}/conversations", status_code=HTTP_201_CREATED)
    async def open_session(
        self,
        world_id: FromPath[uuid.UUID],
        worlds: NamedDependency[WorldService],
        principal: NamedDependency[Principal],
    ) -> WorldSessionOut:
        """A conversation with the world's World Agent: operator mode for operator and admin keys,
        customer mode (read-only tools) for `user` keys. Post messages to it as to any conversation."""
        conversation, mode = await worlds.open_session(principal, world_id)
        return WorldSessionOut(conversation=conversation_out(conversation), world_id=world_id, mode=mode)


def _recorded(body: T, *, created: bool) -> Response[T]:
    """201 for what the client's id recorded now, 200 for the same record written before (idempotent)."""
    return Response(body, status_code=HTTP_201_CREATED if created else HTTP_200_OK)


def world_route_handlers() -> list[Any]:
    return [WorldController]
