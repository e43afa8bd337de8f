"""Platform events: what the rest of the platform tells the service about a workspace.

Three types arrive at `POST /v1/events`. Each carries an `id` chosen by the sender, which makes
posting it idempotent per workspace. Some warrant a conversation the service starts on its own;
`proactive_turn` says which and what the customer agent is asked. The events themselves, as
records, are in `customer_records`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sursis.domain.records.customer_records import PlatformEvent, PlatformEventType


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
