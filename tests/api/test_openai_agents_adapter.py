"""An OpenAI Agents SDK agent governed by the real app over HTTP through
`sursis.integrations.openai_agents` (on SQLite and PostgreSQL): its run stops on an approval item,
the item is filed with Sursis and the `RunState` approved or rejected from the decision; an approval
runs the tool once and closes the trail, a rejection reaches the model with the approvers' reason."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK (the `dev` extra) is not installed")

from agents import Agent, Runner, ToolCallOutputItem, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from sursis.domain.access import Role  # noqa: E402
from sursis.integrations.openai_agents import ApprovalsClient, SursisApprovals  # noqa: E402
from tests.api.conftest import Live, LiveFactory  # noqa: E402
from tests.conftest import KeyMaker, eventually  # noqa: E402

set_tracing_disabled(True)


def billing_agent(effects: list[int]) -> Agent[Any]:
    @function_tool(needs_approval=True)
    def wire_money(amount: int) -> str:
        """Wire money to the supplier."""
        effects.append(amount)
        return f"wired {amount}"

    model = ScriptedModel(
        [[function_call("wire_money", {"amount": 900}, call_id="call-1")], [assistant_message("done")]]
    )
    return Agent(name="billing", model=model, tools=[wire_money])


async def decide_when_filed(live: Live, decision: dict[str, Any]) -> str:
    async def look() -> str | None:
        items = (await live.http.get("/v1/pending", params={"tool_name": "wire_money"})).json()["items"]
        return items[0]["correlation_id"] if items else None

    cid: str = await eventually(look, limit=30)
    decided = await live.http.post(f"/v1/pending/{cid}/resolve", json=decision)
    assert decided.status_code == 200, decided.text
    return cid


async def run(live: Live, key: str, decision: dict[str, Any]) -> tuple[list[Any], list[int], str]:
    effects: list[int] = []
    agent = billing_agent(effects)
    approvals = SursisApprovals(
        ApprovalsClient(live.base_url, key, "billing-sdk", poll_seconds=5), "thread-1"
    )
    result = await Runner.run(agent, "Pay the supplier.")
    assert len(result.interruptions) == 1
    state, cid = await asyncio.gather(approvals.decide(result), decide_when_filed(live, decision))
    resumed = await Runner.run(agent, state)
    assert not resumed.interruptions
    await approvals.report(resumed)
    outputs = [i.output for i in resumed.new_items if isinstance(i, ToolCallOutputItem)]
    return outputs, effects, cid


async def test_an_approved_item_runs_once(live: LiveFactory, keys: KeyMaker) -> None:
    async with live() as app:
        key = await keys.make(Role.USER, name="billing-sdk")
        outputs, effects, cid = await run(app, key, {"decision": "approve"})
        assert (outputs, effects) == (["wired 900"], [900])
        request = (await app.http.get(f"/v1/approvals/{cid}")).json()
        assert request["state"] == "ran"


async def test_a_rejected_item_tells_the_model_why(live: LiveFactory, keys: KeyMaker) -> None:
    async with live() as app:
        key = await keys.make(Role.USER, name="billing-sdk")
        outputs, effects, _ = await run(app, key, {"decision": "deny", "reason": "not this month"})
        assert (outputs, effects) == (["Denied by the approvers: not this month"], [])
