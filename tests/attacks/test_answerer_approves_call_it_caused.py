"""Attack: the requester was only the key that posted the message. A person who answers an
elicitation steers what the agent does next (its answer is the tool result the model acts on), so
an operator who answered could approve the gated call the answer caused in one click. The key that
answered is the requester of the calls the run makes after it: its own approval is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import CallDeferred

from sursis.app.main import create_app
from sursis.app.service import Service
from sursis.domain.access import Role
from sursis.infra.agents.adopted import adopt
from tests.attacks.policy_attacks import Shop, problem
from tests.conftest import KeyMaker, call, make_settings, script

REFUNDED: list[dict[str, Any]] = []


def desk_agent() -> Any:
    agent: Agent[None, str] = Agent(name="desk", instructions="Serve the desk.")

    @agent.tool_plain
    def ask_customer(question: str) -> str:
        """Ask the customer a question; a person's answer is the result."""
        raise CallDeferred()

    @agent.tool(requires_approval=True)
    def refund(ctx: RunContext[Any], order_id: str, amount: int) -> str:
        """Refund an order."""
        REFUNDED.append({"order_id": order_id, "amount": amount})
        return f"refunded {amount}"

    return adopt(agent)


@pytest.fixture
async def desk(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    REFUNDED.clear()
    settings = make_settings(seeded, agents=["assistant"], run_worker=True)
    service = Service.from_settings(settings, agents=[desk_agent()])
    async with AsyncTestClient(app=create_app(settings, service=service)) as http:
        people = Shop(http, keys)
        await people.key("admin", Role.ADMIN)
        yield people


async def test_the_operator_who_answered_cannot_approve_the_call_its_answer_caused(desk: Shop) -> None:
    await desk.key("uma", Role.USER)
    for name in ("rex", "ann"):
        await desk.key(name, Role.OPERATOR)
    created = await desk.http.post("/v1/conversations", json={"agent": "desk"}, headers=desk.headers["uma"])
    conversation = created.json()["id"]
    steps = script(call("ask_customer", question="which order?"), call("refund", order_id="A1", amount=900))
    posted = await desk.http.post(
        f"/v1/conversations/{conversation}/messages?wait=10",
        json={"content": steps},
        headers=desk.headers["uma"],
    )
    run = await desk.run(posted.json()["id"], "uma")
    [question] = run["pending"]
    assert (question["kind"], question["requested_by"]) == ("elicitation", desk.ids["uma"])

    answered = await desk.http.post(
        f"/v1/pending/{question['correlation_id']}/resolve",
        json={"decision": "answer", "result": "order A1, refund it all"},
        headers=desk.headers["rex"],
    )
    assert answered.status_code == 200, answered.text
    run = await desk.run(run["id"], "uma")
    [gated] = run["pending"]
    assert (gated["tool_name"], gated["requested_by"]) == ("refund", desk.ids["rex"])

    problem(await desk.resolve("rex", gated["correlation_id"]), 403, "self_approval")
    assert REFUNDED == []
    approved = await desk.resolve("ann", gated["correlation_id"])
    assert approved.status_code == 200, approved.text
    assert (await desk.run(run["id"], "uma"))["status"] == "completed"
    assert REFUNDED == [{"order_id": "A1", "amount": 900}]
