"""Adopted agents keep the output they declared (`output_agents.py`): an output validator, an output
function, `TextOutput`, `NativeOutput`, `PromptedOutput`, a union and a plain type each complete an
approval turn (gated tool → approve → output), and the output is JSON in the API and the client."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.agent import WrapperAgent
from pydantic_ai.models.test import TestModel

from sursis import Service
from sursis.app.main import create_app
from sursis.client import AsyncClient
from sursis.domain.errors import ToolDeclarationError
from sursis.infra.agents.adopted import adopt
from sursis.infra.runner.agents import serve_agent
from sursis.testing import expect_pending, resolve_and_settle
from tests.adoption.output_agents import AGENTS, EXPECTED, HELD, Itinerary
from tests.api.live import serve
from tests.conftest import admin_headers, make_settings


@pytest.mark.parametrize("agent", list(EXPECTED))
async def test_each_kind_of_output_completes_an_approval_turn(database_url: str, agent: str) -> None:
    HELD.clear()
    async with Service.open(database_url, agents=AGENTS) as svc:
        conversation = await svc.start_conversation(agent)
        await svc.send(conversation.id, "book me a trip")
        [call] = await expect_pending(svc, tool_name="hold_seat")
        assert HELD == []
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.error) == ("completed", None)
        assert view.run.output_value() == EXPECTED[agent]
        assert HELD == ["Paris"]
        events = [e async for e in svc.events(conversation.id, follow=False)]
        [completed] = [e.data for e in events if e.type == "run.completed"]
        assert completed["output"] == EXPECTED[agent], "the event carries the output as JSON too"


async def test_the_output_is_json_in_the_api_and_the_client(seeded: str) -> None:
    settings = make_settings(seeded, agents=["tests.adoption.output_agents:AGENTS"])
    key = (await admin_headers(seeded))["Authorization"].removeprefix("Bearer ")
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        serve(create_app(settings)) as url,
        AsyncClient(url, key) as client,
        httpx.AsyncClient(base_url=url, headers=headers) as http,
    ):
        for agent in ("validated", "function-output", "text-output", "int-output"):
            conversation = await client.create_conversation(agent)
            suspended = await client.send(conversation.id, "book me a trip", wait=10)
            assert suspended.status == "suspended", suspended
            [pending] = suspended.pending
            await client.resolve(pending.correlation_id, "approve")
            run = await client.get_run(suspended.id, wait=10)
            assert (run.status, run.output) == ("completed", EXPECTED[agent])
            raw = (await http.get(f"/v1/runs/{run.id}")).json()
            assert raw["output"] == EXPECTED[agent], "the output is JSON, not a string holding JSON"
        document = (await http.get("/schema/openapi.json")).json()
        output = document["components"]["schemas"]["RunOut"]["properties"]["output"]
        assert "string" not in str(output.get("type", "")) and "JSON" in output["description"]


async def test_a_text_answer_that_looks_like_json_stays_a_string(seeded: str) -> None:
    """A text answer (and every run stored before outputs were typed) is shown as the text it is."""
    settings = make_settings(seeded)
    key = (await admin_headers(seeded))["Authorization"].removeprefix("Bearer ")
    async with serve(create_app(settings)) as url, AsyncClient(url, key) as client:
        conversation = await client.create_conversation("ops")
        run = await client.send(conversation.id, 'SCRIPT: ["{\\"a\\": 1}"]', wait=10)
        run = await client.get_run(run.id, wait=10)
        assert (run.status, run.output) == ("completed", '{"a": 1}')


def test_a_wrapped_agent_with_validators_is_refused_at_start_in_one_line() -> None:
    inner: Agent[None, Itinerary] = Agent(TestModel(), name="inner", output_type=Itinerary)

    @inner.output_validator
    def keep(output: Itinerary) -> Itinerary:
        return output

    definition = adopt(WrapperAgent(inner), name="wrapped")
    with pytest.raises(ToolDeclarationError) as refused:
        serve_agent(definition, TestModel())
    message = str(refused.value)
    assert "'wrapped'" in message and "DeferredToolRequests" in message and "\n" not in message


def test_the_adopted_agent_itself_is_left_as_it_is() -> None:
    agent: Any = AGENTS[0]
    served = serve_agent(adopt(agent), TestModel())
    assert served.agent is not agent and served.agent.name == agent.name
    assert agent.output_type is Itinerary
    assert "output_type" not in served.iter_options
