"""pydantic-ai features an adopted agent keeps (docs/compatibility.md, "Compatibility with pydantic-ai"):
a toolset of its own, history processors (`ProcessHistory`), model settings and capabilities, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, ModelSettings
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from sursis import Service, ToolOptions, adopt
from sursis.testing import ScriptedModel, expect_pending, resolve_and_settle, settle


async def test_a_function_toolset_given_to_the_agent_is_gated_and_run(database_url: str) -> None:
    ran: list[str] = []

    def close_ticket(ticket_id: str) -> str:
        """Close a ticket."""
        ran.append(ticket_id)
        return f"closed {ticket_id}"

    agent = Agent(name="tickets", toolsets=[FunctionToolset([close_ticket])])
    definition = adopt(agent, tools={"close_ticket": ToolOptions(approval="requires_approval")})
    model = ScriptedModel().call("close_ticket", ticket_id="T1").text("Closed.")
    async with Service.open(database_url, agents=[definition], model=model.model) as svc:
        conversation = await svc.start_conversation("tickets")
        await svc.send(conversation.id, "close T1")
        [call] = await expect_pending(svc, tool_name="close_ticket")
        assert ran == []
        view = await resolve_and_settle(svc, call, "approve")
    assert (view.run.status, view.run.output, ran) == ("completed", "Closed.", ["T1"])


async def test_history_processors_shape_what_the_model_is_sent(database_url: str) -> None:
    def last_request_only(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-1:]

    agent = Agent(name="forgetful", capabilities=[ProcessHistory(last_request_only)])
    model = ScriptedModel()
    async with Service.open(database_url, agents=[agent], model=model.model) as svc:
        conversation = await svc.start_conversation("forgetful")
        for text in ("first", "second"):
            run = await svc.send(conversation.id, text)
            await settle(svc, run.id)
    prompts = [
        [p.content for m in r for p in m.parts if isinstance(p, UserPromptPart)] for r in model.requests
    ]
    assert prompts == [["first"], ["second"]]


async def test_the_agents_model_settings_and_capabilities_reach_its_model(database_url: str) -> None:
    seen: list[Any] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        request = messages[-1]
        instructions = request.instructions if isinstance(request, ModelRequest) else None
        seen.append(((info.model_settings or {}).get("temperature"), instructions))
        return ModelResponse(parts=[TextPart("ok")])

    class Stamp(AbstractCapability[Any]):
        """Adds an instruction to every request."""

        def get_instructions(self) -> str:
            return "Answer politely."

    agent = Agent(
        FunctionModel(answer),
        name="tuned",
        model_settings=ModelSettings(temperature=0.1),
        capabilities=[Stamp()],
    )
    async with Service.open(database_url, agents=[agent]) as svc:
        conversation = await svc.start_conversation("tuned")
        run = await svc.send(conversation.id, "hello")
        await svc.run_until_idle()
        view = await svc.get_run(run.id)
    assert (view.run.status, view.run.output) == ("completed", "ok")
    assert seen == [(0.1, "Answer politely.")]
