"""The offline scripted model follows the SCRIPT protocol exactly."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import TextPart, ToolCallPart

from sursis.infra.agents.scripted import parse_script, scripted_model


def make_agent() -> tuple[Agent[None, str], list[Any]]:
    seen: list[Any] = []
    agent: Agent[None, str] = Agent(scripted_model())

    @agent.tool_plain
    def lookup(key: str) -> dict[str, str]:
        seen.append(key)
        return {"value": key.upper()}

    return agent, seen


async def test_tool_steps_then_text_step() -> None:
    agent, seen = make_agent()
    prompt = 'hi\nSCRIPT: [[{"tool": "lookup", "args": {"key": "a"}}, {"tool": "lookup", "args": {"key": "b"}}], "bye"]'
    result = await agent.run(prompt)
    assert sorted(seen) == ["a", "b"]
    assert result.output == "bye"
    calls = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolCallPart)]
    assert len({c.tool_call_id for c in calls}) == 2


async def test_without_script_left_it_quotes_results_since_the_last_call() -> None:
    agent, _ = make_agent()
    result = await agent.run('SCRIPT: [[{"tool": "lookup", "args": {"key": "x"}}]]')
    assert result.output == "RESULTS: " + json.dumps([{"value": "X"}], sort_keys=True)


async def test_plain_message_is_echoed() -> None:
    agent, _ = make_agent()
    assert (await agent.run("hello there")).output == "ECHO: hello there"


async def test_malformed_script_answers_with_an_error_text() -> None:
    agent, _ = make_agent()
    result = await agent.run("SCRIPT: [oops")
    last = result.all_messages()[-1].parts[0]
    assert isinstance(last, TextPart)
    assert last.content.startswith("SCRIPT ERROR:")


def test_parse_script_finds_the_line() -> None:
    assert parse_script('text\n  SCRIPT: ["a"]\nmore') == ["a"]
    assert parse_script("no script") is None
