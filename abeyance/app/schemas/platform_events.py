"""`POST /v1/events`: the platform's domain events, one schema per type, and the answer."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from abeyance.app.schemas.validation import JsonObject, Strict, UtcDatetime
from abeyance.domain.customer.events import Intake, PlatformEvent, PlatformEventType

EventId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:\-]+$")]
Name = Annotated[str, Field(min_length=1, max_length=100)]


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
    baseline: float
    observed: float
    scan_id: EventId | None = None


class ConfigChangedData(Strict):
    old: JsonObject
    new: JsonObject


class _Event(Strict):
    id: EventId
    workspace: Name | None = None
    occurred_at: UtcDatetime | None = None


class ScanCompleted(_Event):
    type: Literal["scan.completed"]
    data: ScanCompletedData


class AnomalyDetected(_Event):
    type: Literal["anomaly.detected"]
    data: AnomalyData


class ConfigChanged(_Event):
    type: Literal["workspace.config_changed"]
    data: ConfigChangedData


EventBody = Annotated[ScanCompleted | AnomalyDetected | ConfigChanged, Field(discriminator="type")]


def platform_event(body: ScanCompleted | AnomalyDetected | ConfigChanged, workspace: str) -> PlatformEvent:
    data: dict[str, Any] = body.data.model_dump(mode="json")
    return PlatformEvent(
        id=body.id,
        type=PlatformEventType(body.type),
        workspace=workspace,
        data=data,
        occurred_at=body.occurred_at,
    )


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
