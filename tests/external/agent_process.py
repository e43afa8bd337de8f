"""An agent Sursis does not host, in a process of its own: a plain pydantic-ai agent whose gated
tool is decided by Sursis through `sursis_capabilities`. Its model is a `FunctionModel` that calls
`wire_money(amount=900)` (tool call id `call-1`), then answers with what the tool returned.

    python -m tests.external.agent_process URL KEY CONVERSATION EFFECT_FILE

Prints one JSON line: the run's output and the `answered_by` of its deferred results. Each effect is
a line appended to EFFECT_FILE.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sursis.integrations.pydantic_ai import SursisApprovals, SursisOutcomes, sursis_capabilities


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    returned = (
        [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    )
    if not returned:
        return ModelResponse(parts=[ToolCallPart("wire_money", {"amount": 900}, tool_call_id="call-1")])
    part = returned[0]
    return ModelResponse(parts=[TextPart(f"{part.outcome}: {part.content}")])


def build(url: str, key: str, conversation: str, effects: Path) -> tuple[Agent[None, str], SursisApprovals]:
    capabilities = sursis_capabilities(
        url, key, agent="billing-bot", conversation=conversation, expires_in=timedelta(minutes=5)
    )
    outcomes = capabilities[1]
    assert isinstance(outcomes, SursisOutcomes)
    agent: Agent[None, str] = Agent(FunctionModel(respond), capabilities=capabilities)

    @agent.tool_plain(requires_approval=True)
    def wire_money(amount: int) -> str:
        """Wire money to the supplier."""
        with effects.open("a") as out:
            out.write(f"wired {amount}\n")
        return f"wired {amount}"

    return agent, outcomes.approvals


async def main(url: str, key: str, conversation: str, effects: str) -> None:
    agent, approvals = build(url, key, conversation, Path(effects))
    result = await agent.run("Pay the supplier.")
    answered: dict[str, Any] = {}
    for message in result.all_messages():
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                answered[part.tool_call_id] = part.outcome
    report = {"output": result.output, "outcomes": answered, "answered_by": approvals.answered_by}
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
