"""Platform events as records: what the rest of the platform tells the service about a workspace,
validated, and what taking one in did.

Beside the unit of work's other ports rather than in `customer/`: `customer_ports` names them, and
`ports.UnitOfWork` names its `WorkspaceRepository`, while the customer package imports `ports`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sursis.domain.records import Conversation


class PlatformEventType(StrEnum):
    SCAN_COMPLETED = "scan.completed"
    ANOMALY_DETECTED = "anomaly.detected"
    CONFIG_CHANGED = "workspace.config_changed"


@dataclass(frozen=True, slots=True)
class ScanReport:
    """A scan's result as a `scan.completed` event carries it, validated: what the `scans` row holds."""

    id: str
    status: str
    verdict: str | None
    scores: dict[str, float]
    changeset: dict[str, Any]
    failures: tuple[tuple[str, str], ...]
    """(test, error) pairs."""
    completed_at: datetime | None

    def failures_json(self) -> list[dict[str, str]]:
        return [{"test": test, "error": error} for test, error in self.failures]


@dataclass(frozen=True, slots=True)
class Rubric:
    """One rubric of a workspace's evaluation framework (threshold between 0 and 1, weight >= 0)."""

    name: str
    description: str
    threshold: float
    weight: float


@dataclass(frozen=True, slots=True)
class PlatformEvent:
    """One validated event. `data` has the shape its type's schema (docs/customer-agent.md) gives,
    as JSON (what is stored with the event); `scan` and `rubrics` are its typed parts that become
    rows: `scan` for a `scan.completed`, `rubrics` when a `workspace.config_changed` replaces them."""

    id: str
    type: PlatformEventType
    workspace: str
    data: dict[str, Any]
    occurred_at: datetime | None = None
    scan: ScanReport | None = None
    rubrics: tuple[Rubric, ...] | None = None


@dataclass(frozen=True, slots=True)
class Intake:
    """What posting an event did: stored now (`duplicate` False) or earlier under the same id."""

    event_id: str
    type: PlatformEventType
    workspace: str
    duplicate: bool
    received_at: datetime
    conversation_id: uuid.UUID | None
    run_id: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class ListedConversation:
    """A conversation as `GET /v1/conversations` lists it: who started it, and the event if one did."""

    conversation: Conversation
    initiator: str
    event_id: str | None
    event_type: str | None
