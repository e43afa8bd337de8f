"""Context retention per tool: what the model request shows of older results (read from the
request itself), while the stored log and the tool-call records keep every result."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from sursis.app.container import Container, build_container
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.errors import ToolDeclarationError
from sursis.domain.records import Principal
from sursis.domain.states import RunStatus
from sursis.domain.tools import ContextRetention, ToolSpec
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.history import decode

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)


async def recent(topic: str) -> str:
    """Kept for one turn."""
    return f"recent:{topic}"


async def latest(topic: str) -> str:
    """Only the latest two are kept."""
    return f"latest:{topic}"


async def forever(topic: str) -> str:
    """Never evicted."""
    return f"forever:{topic}"


def retaining_agent() -> AgentDefinition:
    tools = (
        DeclaredTool.declare(recent, ToolSpec("recent", context=ContextRetention(age=1))),
        DeclaredTool.declare(latest, ToolSpec("latest", context=ContextRetention(count=2))),
        DeclaredTool.declare(forever, ToolSpec("forever", context=ContextRetention(never_evict=True))),
    )
    return AgentDefinition("retaining", "Use the tools.", tools)


def ok(result: str) -> str:
    return str({"ok": True, "result": result})


def results_of(messages: list[ModelMessage]) -> dict[str, str]:
    """Each tool result the model is shown, by call id."""
    return {
        part.tool_call_id: str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


@pytest.fixture
async def container(seeded: str, settings_factory: Callable[..., Settings]) -> AsyncIterator[Container]:
    seen: list[list[ModelMessage]] = []

    async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        """Each turn: calls every tool once (turn n: call ids `<tool>_<n>`), then answers."""
        seen.append(list(messages))
        turn = sum(
            1
            for m in messages
            if isinstance(m, ModelRequest) and m.parts and m.parts[0].part_kind == "user-prompt"
        )
        if isinstance(messages[-1], ModelRequest) and messages[-1].parts[0].part_kind == "user-prompt":
            calls = {
                i: DeltaToolCall(
                    name=tool, json_args=json.dumps({"topic": f"t{turn}"}), tool_call_id=f"{tool}_{turn}"
                )
                for i, tool in enumerate(("recent", "latest", "forever"))
            }
            yield calls
        else:
            yield "done"

    built = build_container(
        settings_factory(history_turns=0),
        extra_agents=[retaining_agent()],
        model=FunctionModel(stream_function=model),
    )
    built.seen = seen  # type: ignore[attr-defined]
    yield built
    await built.close()


async def test_the_model_request_shows_stubs_for_results_out_of_their_tools_retention(
    container: Container,
) -> None:
    conversation = await container.conversations.create_conversation(ADMIN, "retaining", "default")
    for _ in range(3):
        run = await container.conversations.post_message(ADMIN, conversation.id, "go")
        assert await container.worker.run_once()
        assert (await container.runs.get_run(ADMIN, run.id)).run.status is RunStatus.COMPLETED
    seen: list[list[ModelMessage]] = container.seen  # type: ignore[attr-defined]
    shown = results_of(seen[-1])  # the last request of turn 3
    assert shown["recent_3"] == ok("recent:t3")  # its own turn
    for older in ("recent_1", "recent_2"):
        assert shown[older].startswith(f"[result of recent (call {older}) no longer shown")
    assert shown["latest_3"] == ok("latest:t3") and shown["latest_2"] == ok("latest:t2")
    assert shown["latest_1"].startswith("[result of latest (call latest_1) no longer shown")
    assert [shown[f"forever_{n}"] for n in (1, 2, 3)] == [ok(f"forever:t{n}") for n in (1, 2, 3)]
    # within turn 1 nothing was out of view yet
    assert results_of(seen[1]) == {f"{t}_1": ok(f"{t}:t1") for t in ("recent", "latest", "forever")}

    async with container.uow() as uow:  # the stored log and the tool-call records are untouched
        stored = results_of(decode(await uow.messages.read(conversation.id)))
    assert stored["recent_1"] == ok("recent:t1") and stored["latest_1"] == ok("latest:t1")
    assert any(isinstance(m, ModelResponse) and isinstance(m.parts[0], ToolCallPart) for m in seen[-1])


@pytest.mark.parametrize(
    "arguments",
    [{}, {"age": 0}, {"count": -1}, {"age": 2, "never_evict": True}],
)
def test_an_illegal_context_retention_is_refused_when_declared(arguments: dict[str, Any]) -> None:
    with pytest.raises(ToolDeclarationError):
        ContextRetention(**arguments)
