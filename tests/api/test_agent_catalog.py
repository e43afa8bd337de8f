"""`GET /v1/agents`: the agents a key may use, with their tools, as the OpenAPI document says."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient
from pydantic_ai import Agent

from sursis.app.main import create_app
from sursis.domain.access import Role
from sursis.infra.agents.adopted import ToolOptions, adopt
from tests.conftest import KeyMaker, bearer, make_settings


async def test_every_served_agent_is_listed_with_its_tools(client: AsyncTestClient[Any]) -> None:
    response = await client.get("/v1/agents")
    assert response.status_code == 200, response.text
    agents = {a["name"]: a for a in response.json()}
    assert sorted(agents) == ["assistant", "customer", "ops", "world"]
    ops_tools = {t["name"]: t for t in agents["ops"]["tools"]}
    assert ops_tools["replay_dlq_event"] == {
        "name": "replay_dlq_event",
        "description": ops_tools["replay_dlq_event"]["description"],
        "category": "mutate",
        "executor": "server",
        "approval": "requires_approval",
        "effect": ops_tools["replay_dlq_event"]["effect"],
        "default_timeout_seconds": 86400.0,
        "input_schema": ops_tools["replay_dlq_event"]["input_schema"],
        "server": None,
        "capability": None,
        "annotations": None,
        "schema_digest": None,
        "after_crash": "at_most_once",
    }
    assert ops_tools["list_dlq_events"]["after_crash"] == "may_repeat"
    assert "event_id" in ops_tools["replay_dlq_event"]["input_schema"]["properties"]
    assert ops_tools["replay_dlq_event"]["description"]
    assert ops_tools["list_dlq_events"]["category"] == "read"
    assert ops_tools["list_dlq_events"]["default_timeout_seconds"] is None
    assert ops_tools["ask_operator"]["executor"] == "human"
    assert ops_tools["ask_operator"]["default_timeout_seconds"] == 3600.0
    assistant = {t["name"]: t for t in agents["assistant"]["tools"]}
    assert assistant["web_search"]["executor"] == "provider"
    assert assistant["get_browser_location"]["default_timeout_seconds"] == 30.0
    assert agents["ops"]["model"] == "scripted"


async def test_a_system_key_may_use_no_agent(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    system = await keys.make(Role.SYSTEM)
    refused = await client.get("/v1/agents", headers=bearer(system))
    assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
    user = await keys.make(Role.USER)
    assert len((await client.get("/v1/agents", headers=bearer(user))).json()) == 4
    assert (await client.get("/v1/agents", headers={"Authorization": "Bearer nope"})).status_code == 401


async def test_an_adopted_agent_is_listed_with_its_options_and_model(seeded: str, keys: KeyMaker) -> None:
    agent = Agent(name="support", model="test", description="Answers customers.")

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        return "ok"

    definition = adopt(agent, tools={"refund": ToolOptions(effect="Refund {amount}", timeout=120)})
    settings = make_settings(seeded, agents=["assistant"])
    from sursis.app.service import Service

    service = Service.from_settings(settings, agents=[definition])
    async with AsyncTestClient(app=create_app(settings, service=service)) as http:
        http.headers.update(bearer(await keys.make(Role.OPERATOR)))
        [listed] = (await http.get("/v1/agents")).json()
    assert listed == {
        "name": "support",
        "description": "Answers customers.",
        "model": "test",
        "tools": [
            {
                "name": "refund",
                "description": "Refund an order.",
                "category": "mutate",
                "executor": "server",
                "approval": "requires_approval",
                "effect": "Refund {amount}",
                "default_timeout_seconds": 120.0,
                "input_schema": {
                    "additionalProperties": False,
                    "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
                    "required": ["order_id", "amount"],
                    "type": "object",
                },
                "server": None,
                "capability": None,
                "annotations": None,
                "schema_digest": None,
                "after_crash": "at_most_once",
            }
        ],
    }


async def test_the_catalog_says_which_adopted_tools_may_repeat(seeded: str, keys: KeyMaker) -> None:
    """Only a tool declared `read` or idempotent is run again after a crash; one nobody declared is
    started at most once (it still runs without asking)."""
    agent = Agent(name="till", model="test")

    @agent.tool_plain
    def look_up(order_id: str) -> str:
        """Look an order up."""
        return "ok"

    @agent.tool_plain
    def charge(order_id: str) -> str:
        """Charge an order (nobody said what kind of tool this is)."""
        return "ok"

    @agent.tool_plain
    def book(order_id: str) -> str:
        """Book an order, keyed on the call id."""
        return "ok"

    options = {"look_up": ToolOptions(category="read"), "book": ToolOptions(idempotent=True)}
    settings = make_settings(seeded, agents=["assistant"])
    from sursis.app.service import Service

    service = Service.from_settings(settings, agents=[adopt(agent, tools=options)])
    async with AsyncTestClient(app=create_app(settings, service=service)) as http:
        http.headers.update(bearer(await keys.make(Role.OPERATOR)))
        [listed] = (await http.get("/v1/agents")).json()
    shown = {t["name"]: (t["category"], t["approval"], t["after_crash"]) for t in listed["tools"]}
    assert shown == {
        "look_up": ("read", "auto", "may_repeat"),
        "charge": ("read", "auto", "at_most_once"),
        "book": ("read", "auto", "may_repeat"),
    }


async def test_the_catalog_is_in_the_openapi_document(client: AsyncTestClient[Any]) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    operation = document["paths"]["/v1/agents"]["get"]
    assert {"200", "401", "429"} <= set(operation["responses"])
    schema = document["components"]["schemas"]
    tool = schema["ToolOut"]["properties"]
    assert tool["category"]["$ref"].endswith("Category") or "enum" in str(tool["category"])
    assert {"name", "description", "model", "tools"} <= set(schema["AgentOut"]["properties"])
