"""The OpenAI Agents SDK, governed by Sursis: a run that stops on tool approvals
(`function_tool(needs_approval=True)`, `result.interruptions`) has each approval item filed with
Sursis, and its `RunState` approved or rejected from Sursis's decisions.

    approvals = SursisApprovals(ApprovalsClient(url, key, agent="billing-bot"), conversation=thread_id)
    result = await Runner.run(agent, "Pay the supplier.")
    while result.interruptions:
        result = await Runner.run(agent, await approvals.decide(result))
    await approvals.report(result)

Each item is filed under the conversation label and the model's call id: a process that died while
it waited and runs again files the same requests and gets the same decisions; an approval is
consumed once. A rejection carries the approvers' reason to the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agents import RunResult, RunState, ToolApprovalItem, ToolCallOutputItem

from sursis.integrations.approvals_http import ApprovalsClient

__all__ = ["ApprovalsClient", "SursisApprovals"]


@dataclass
class SursisApprovals:
    """Approves or rejects an interrupted run's approval items from Sursis's decisions."""

    client: ApprovalsClient
    conversation: str
    consumed: dict[str, str] = field(default_factory=dict)
    """Correlation ids of the approvals consumed, by the model's call id (for the outcome)."""
    answered_by: dict[str, list[str]] = field(default_factory=dict)
    """Who decided each call, by the model's call id."""

    async def decide(self, result: RunResult) -> RunState[Any]:
        """The run's state with every interruption approved or rejected, ready for `Runner.run`."""
        state: RunState[Any] = result.to_state()
        async with self.client.http() as http:
            for item in result.interruptions:
                call_id, name, args = _call_of(item)
                verdict = await self.client.decide(
                    http,
                    name,
                    args,
                    idempotency_key=f"{self.conversation}:{call_id}",
                    conversation=self.conversation,
                )
                self.answered_by[call_id] = list(verdict.deciders)
                if verdict.approved:
                    self.consumed[call_id] = verdict.correlation_id
                    state.approve(item)
                else:
                    state.reject(item, rejection_message=verdict.message)
        return state

    async def report(self, result: RunResult) -> None:
        """Close the requests of the approved calls the resumed run executed (`ran`)."""
        for item in result.new_items:
            if not isinstance(item, ToolCallOutputItem):
                continue
            call_id = _field(item.raw_item, "call_id")
            cid = self.consumed.pop(str(call_id), None) if call_id is not None else None
            if cid is not None:
                await self.client.report(cid, "ran")


def _call_of(item: ToolApprovalItem) -> tuple[str, str, dict[str, Any]]:
    """The call id, tool name and arguments of a function tool's approval item."""
    raw = item.raw_item
    arguments = _field(raw, "arguments") or "{}"
    args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    return str(_field(raw, "call_id")), str(item.name), args


def _field(raw: Any, key: str) -> Any:
    """A field of a raw model item, which the SDK keeps as a dict or as an object."""
    return raw.get(key) if isinstance(raw, dict) else getattr(raw, key, None)
