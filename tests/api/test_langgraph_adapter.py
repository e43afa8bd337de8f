"""A LangGraph graph governed by the real app over HTTP through `sursis.integrations.langgraph` (on
SQLite and PostgreSQL): a node interrupts with an approval request, the driver answers from Sursis
and resumes; an approval runs the node's effect once and closes the trail, a denial reaches the node
with the approvers' reason."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from sursis.domain.access import Role
from sursis.integrations.langgraph import ApprovalsClient, approval_request, resume_from_sursis
from tests.api.conftest import Live, LiveFactory
from tests.conftest import KeyMaker, eventually


class Payment(TypedDict, total=False):
    amount: int
    result: str


def payments_graph(client: ApprovalsClient, effects: list[int]) -> Any:
    async def pay(state: Payment) -> Payment:
        answer = interrupt(approval_request("wire_money", {"amount": state["amount"]}))
        if not answer["approved"]:
            return {"result": answer["message"]}
        effects.append(answer["args"]["amount"])
        await client.report(answer["correlation_id"], "ran")
        return {"result": f"wired {answer['args']['amount']} ({', '.join(answer['answered_by'])})"}

    graph = StateGraph(Payment)
    graph.add_node("pay", pay)
    graph.add_edge(START, "pay")
    graph.add_edge("pay", END)
    return graph.compile(checkpointer=InMemorySaver())


async def decide_when_filed(live: Live, decision: dict[str, Any]) -> str:
    async def look() -> str | None:
        items = (await live.http.get("/v1/pending", params={"tool_name": "wire_money"})).json()["items"]
        return items[0]["correlation_id"] if items else None

    cid: str = await eventually(look, limit=30)
    decided = await live.http.post(f"/v1/pending/{cid}/resolve", json=decision)
    assert decided.status_code == 200, decided.text
    return cid


async def run_once(live: Live, key: str, thread: str, decision: dict[str, Any]) -> tuple[str, list[int], str]:
    client = ApprovalsClient(live.base_url, key, "payments-graph", poll_seconds=5)
    effects: list[int] = []
    graph = payments_graph(client, effects)
    config: Any = {"configurable": {"thread_id": thread}}
    first = await graph.ainvoke({"amount": 900}, config)
    [pending] = first["__interrupt__"]
    command, cid = await asyncio.gather(
        resume_from_sursis(client, [pending], thread_id=thread), decide_when_filed(live, decision)
    )
    assert command is not None
    final = await graph.ainvoke(command, config)
    return final["result"], effects, cid


async def test_an_approved_interrupt_runs_once(live: LiveFactory, keys: KeyMaker) -> None:
    async with live() as app:
        key = await keys.make(Role.USER, name="payments-graph")
        result, effects, cid = await run_once(app, key, "t-approve", {"decision": "approve"})
        me = (await app.http.get("/v1/me")).json()["id"]
        assert (result, effects) == (f"wired 900 ({me})", [900])
        request = (await app.http.get(f"/v1/approvals/{cid}")).json()
        assert request["state"] == "ran"


async def test_a_denied_interrupt_tells_the_node(live: LiveFactory, keys: KeyMaker) -> None:
    async with live() as app:
        key = await keys.make(Role.USER, name="payments-graph")
        decision = {"decision": "deny", "reason": "not this month"}
        result, effects, _ = await run_once(app, key, "t-deny", decision)
        assert (result, effects) == ("Denied by the approvers: not this month", [])
