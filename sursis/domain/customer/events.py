"""Platform events: what the rest of the platform tells the service about a workspace.

Three types arrive at `POST /v1/events`. Each carries an `id` chosen by the sender, which makes
posting it idempotent per workspace. Some warrant a conversation the service starts on its own;
`proactive_turn` says which and what the customer agent is asked.
"""

from __future__ import annotations

import json
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


@dataclass(frozen=True, slots=True)
class ProactiveTurn:
    """The first turn of a conversation an event starts: which specialist to consult and why."""

    specialist: str
    prompt: str


def _plan(specialist: str, task: str, steps: list[Any]) -> str:
    """The delegation as a `SCRIPT:` line: the offline scripted model follows it; a provider's
    model reads it as the suggested routing."""
    specialist_task = f"{task}\nSCRIPT: {json.dumps(steps)}"
    plan = [{"tool": "delegate", "args": {"specialist": specialist, "task": specialist_task}}]
    return "SCRIPT: " + json.dumps(plan)


def proactive_turn(event: PlatformEvent) -> ProactiveTurn | None:
    """The turn an event starts, or None when it does not warrant a conversation.

    Every completed scan and every anomaly does; a configuration change only when the new
    configuration differs from the old one.
    """
    data = event.data
    match event.type:
        case PlatformEventType.SCAN_COMPLETED:
            scan = data["scan"]
            task = f"Summarise the verdict of scan {scan['id']} for the workspace's users."
            steps: list[Any] = [{"tool": "get_scan_detail", "args": {"scan_id": scan["id"]}}]
            text = f"Scan {scan['id']} completed with verdict {scan.get('verdict') or 'none'}."
            return ProactiveTurn("scan-analyst", f"{text} {task}\n{_plan('scan-analyst', task, steps)}")
        case PlatformEventType.ANOMALY_DETECTED:
            task = (
                f"Investigate the {data['kind']} on {data['metric']}: observed {data['observed']} "
                f"against a baseline of {data['baseline']}."
            )
            steps = [
                [{"tool": "check_workspace_health", "args": {}}, {"tool": "get_recent_errors", "args": {}}]
            ]
            return ProactiveTurn(
                "troubleshooter", f"An anomaly was detected. {task}\n{_plan('troubleshooter', task, steps)}"
            )
        case PlatformEventType.CONFIG_CHANGED:
            if data["old"] == data["new"]:
                return None
            task = "Review the workspace's new evaluation framework configuration against the old one."
            steps = [[{"tool": "get_framework_config", "args": {}}, {"tool": "get_rubrics", "args": {}}]]
            return ProactiveTurn(
                "framework-advisor",
                f"The workspace configuration changed. {task}\n{_plan('framework-advisor', task, steps)}",
            )
