"""`POST /v1/events`: the platform's domain events, one schema per type, and the answer."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sursis.app.schemas.conversations import ConversationOut, conversation_out
from sursis.app.schemas.validation import JsonObject, Strict, UtcDatetime, WorkspaceName
from sursis.domain.errors import ValidationFailed
from sursis.domain.records.customer_records import (
    Intake,
    ListedConversation,
    PlatformEvent,
    PlatformEventType,
    Rubric,
    ScanReport,
)

EventId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:\-]+$")]
Name = Annotated[str, Field(min_length=1, max_length=100)]
Number = Annotated[float, Field(allow_inf_nan=False)]
MAX_RUBRICS = 100


class ScanFailure(Strict):
    test: Annotated[str, Field(min_length=1, max_length=200)]
    error: Annotated[str, Field(max_length=4000)]


class ScanResult(Strict):
    id: EventId
    status: Literal["completed", "failed", "cancelled"]
    verdict: Literal["pass", "warn", "fail"] | None = None
    scores: dict[Name, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict, max_length=100)
    changeset: JsonObject = Field(default_factory=dict)
    failures: list[ScanFailure] = Field(default_factory=list, max_length=200)
    completed_at: UtcDatetime | None = None


class ScanCompletedData(Strict):
    scan: ScanResult


class AnomalyData(Strict):
    kind: Literal["quality_regression", "cost_spike"]
    metric: Name
    baseline: Number
    observed: Number
    scan_id: EventId | None = None


class RubricIn(Strict):
    """One rubric: a name, a pass threshold between 0 and 1, a weight (at least 0, at most 1,000)."""

    name: Name
    description: Annotated[str, Field(max_length=2000)] = ""
    threshold: Annotated[float, Field(ge=0, le=1)]
    weight: Annotated[float, Field(ge=0, le=1000)] = 1.0


class FrameworkConfig(BaseModel):
    """A workspace's evaluation framework configuration: free-form, except `rubrics`, which when
    present is a list of valid rubrics with distinct names (it replaces the workspace's rubrics)."""

    model_config = ConfigDict(extra="allow")

    rubrics: list[RubricIn] = Field(default_factory=list, max_length=MAX_RUBRICS)

    @field_validator("rubrics")
    @classmethod
    def distinct_names(cls, rubrics: list[RubricIn]) -> list[RubricIn]:
        names = [r.name for r in rubrics]
        if len(set(names)) != len(names):
            raise ValueError("rubric names must be distinct")
        return rubrics


class ConfigChangedData(Strict):
    old: JsonObject
    new: FrameworkConfig


DATA_SCHEMAS: dict[str, type[Strict]] = {
    PlatformEventType.SCAN_COMPLETED.value: ScanCompletedData,
    PlatformEventType.ANOMALY_DETECTED.value: AnomalyData,
    PlatformEventType.CONFIG_CHANGED.value: ConfigChangedData,
}


class EventIn(Strict):
    """One domain event. `data` has the shape of its `type` (see docs/customer-agent.md)."""

    id: EventId
    type: Literal["scan.completed", "anomaly.detected", "workspace.config_changed"]
    workspace: WorkspaceName | None = None
    occurred_at: UtcDatetime | None = None
    data: JsonObject


def platform_event(body: EventIn, workspace: str) -> PlatformEvent:
    """The validated event; `data` that does not fit its type's schema is a `ValidationFailed`."""
    try:
        data = DATA_SCHEMAS[body.type].model_validate(body.data)
    except ValidationError as exc:
        errors = [
            {"loc": ["body", "data", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False)
        ]
        raise ValidationFailed(f"data does not fit a {body.type} event", extra={"errors": errors}) from None
    return PlatformEvent(
        id=body.id,
        type=PlatformEventType(body.type),
        workspace=workspace,
        data=data.model_dump(mode="json", exclude_unset=True),
        occurred_at=body.occurred_at,
        scan=scan_report(data.scan) if isinstance(data, ScanCompletedData) else None,
        rubrics=replaced_rubrics(data.new) if isinstance(data, ConfigChangedData) else None,
    )


def scan_report(scan: ScanResult) -> ScanReport:
    return ScanReport(
        id=scan.id,
        status=scan.status,
        verdict=scan.verdict,
        scores=dict(scan.scores),
        changeset=dict(scan.changeset),
        failures=tuple((f.test, f.error) for f in scan.failures),
        completed_at=scan.completed_at,
    )


def replaced_rubrics(config: FrameworkConfig) -> tuple[Rubric, ...] | None:
    """The rubrics a new configuration sets; None when it leaves them as they are (no `rubrics`)."""
    if "rubrics" not in config.model_fields_set:
        return None
    return tuple(Rubric(r.name, r.description, r.threshold, r.weight) for r in config.rubrics)


class EventAccepted(BaseModel):
    """What posting an event did. `duplicate`: the id was posted before; nothing changed now."""

    event_id: str
    type: str
    workspace: str
    duplicate: bool
    received_at: datetime
    conversation_id: uuid.UUID | None
    run_id: uuid.UUID | None


def event_accepted(intake: Intake) -> EventAccepted:
    return EventAccepted(
        event_id=intake.event_id,
        type=intake.type.value,
        workspace=intake.workspace,
        duplicate=intake.duplicate,
        received_at=intake.received_at,
        conversation_id=intake.conversation_id,
        run_id=intake.run_id,
    )


class StartingEvent(BaseModel):
    id: str
    type: str


class ListedConversationOut(ConversationOut):
    initiator: Literal["user", "system"]
    event: StartingEvent | None = None


class ConversationList(BaseModel):
    items: list[ListedConversationOut]
    next_cursor: str | None = None


def listed_conversation_out(listed: ListedConversation) -> ListedConversationOut:
    event = (
        StartingEvent(id=listed.event_id, type=listed.event_type or "")
        if listed.event_id is not None
        else None
    )
    return ListedConversationOut(
        **conversation_out(listed.conversation).model_dump(),
        initiator="system" if listed.initiator == "system" else "user",
        event=event,
    )
