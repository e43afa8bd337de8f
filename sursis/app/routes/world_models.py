"""HTTP shapes of the worlds API."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from sursis.app.schemas import ConversationOut, JsonObject, Strict, WorkspaceName
from sursis.domain.worlds.rules import (
    Decision,
    Flag,
    FlagKind,
    Rule,
    RuleState,
    World,
    WorldMode,
    readiness_hash,
)

ClientId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")]


class CreateWorld(Strict):
    domain: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.-]+$")
    title: str = Field(min_length=1, max_length=500)
    workspace: WorkspaceName | None = None


class WorldOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    workspace: str
    domain: str
    title: str
    created_by: str
    created_at: datetime


class WorldPage(BaseModel):
    items: list[WorldOut]


class RecordDecision(Strict):
    """A decision a deployed rule set made; `id` is the client's, and makes the call idempotent."""

    id: ClientId
    rule_ids: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(max_length=100)
    context: JsonObject
    outcome: str = Field(min_length=1, max_length=200)


class DecisionOut(BaseModel):
    id: str
    world_id: uuid.UUID
    rule_ids: list[str]
    context: dict[str, Any]
    outcome: str
    created_at: datetime

    @classmethod
    def of(cls, decision: Decision) -> DecisionOut:
        return cls(**dataclasses.asdict(decision))


class FlagDecision(Strict):
    """A customer's review request or noteworthy mark; `id` is the client's (idempotent)."""

    id: ClientId
    kind: FlagKind
    reason: str = Field(min_length=1, max_length=2000)


class FlagOut(BaseModel):
    id: str
    world_id: uuid.UUID
    decision_id: str
    kind: FlagKind
    reason: str
    created_at: datetime

    @classmethod
    def of(cls, flag: Flag) -> FlagOut:
        return cls(**dataclasses.asdict(flag))


class GateOut(BaseModel):
    passed: bool
    cases: list[dict[str, Any]]
    current: bool
    """False when the predicate or tests changed after the gate ran."""
    ran_at: datetime


class RuleOut(BaseModel):
    rule_id: uuid.UUID
    version: int
    world_id: uuid.UUID
    state: RuleState
    text: str
    predicate: str | None
    applies_when: str | None
    tests: list[dict[str, Any]]
    gate: GateOut | None
    citations: list[dict[str, str]]
    evidence: dict[str, Any]
    reason: str | None
    created_at: datetime
    updated_at: datetime
    enshrined_at: datetime | None

    @classmethod
    def of(cls, rule: Rule) -> RuleOut:
        gate = rule.gate
        return cls(
            rule_id=rule.id,
            version=rule.version,
            world_id=rule.world_id,
            state=rule.state,
            text=rule.text,
            predicate=rule.predicate,
            applies_when=rule.applies_when,
            tests=[dataclasses.asdict(t) for t in rule.tests],
            gate=None
            if gate is None
            else GateOut(
                passed=gate.passed,
                cases=gate.cases,
                current=gate.code_hash == readiness_hash(rule),
                ran_at=gate.ran_at,
            ),
            citations=[dataclasses.asdict(c) for c in rule.citations],
            evidence=rule.evidence,
            reason=rule.reason,
            created_at=rule.created_at,
            updated_at=rule.updated_at,
            enshrined_at=rule.enshrined_at,
        )


class RulePage(BaseModel):
    items: list[RuleOut]


class RuleHistoryOut(BaseModel):
    rule_id: uuid.UUID
    versions: list[RuleOut]


class WorldSessionOut(BaseModel):
    """A World Agent conversation and the mode its key gave it."""

    conversation: ConversationOut
    world_id: uuid.UUID
    mode: WorldMode


def world_out(world: World) -> WorldOut:
    return WorldOut.model_validate(world)
