"""Run by the venv's own Python in `test_wheel.py`, where the wheel sits beside pydantic-ai-harness
(`pip install sursis pydantic-ai-harness`): an agent as a team on the harness writes it, a
`ToolCallJudge` in front of a gated tool, adopted and driven through one approval turn on SQLite.
Prints one JSON line: the versions installed, the run's status and what the judge and the tool saw."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from importlib.metadata import version
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from sursis import Service, adopt

harness = importlib.import_module("pydantic_ai_harness")
SCRIPT = 'SCRIPT: [[{"tool": "drop_table", "args": {"table": "tmp_import"}}], "done"]'


def judged_desk(effects: list[str], verdicts: list[Any]) -> Agent[None, str]:
    judge = harness.ToolCallJudge(
        TestModel(custom_output_args="no"),
        tools=["drop_table"],
        question="Would this destroy data that matters?",
        on_verdict=verdicts.append,
    )
    agent: Agent[None, str] = Agent(name="ops_desk", capabilities=[judge])

    @agent.tool_plain(requires_approval=True)
    def drop_table(table: str) -> str:
        """Drop a table."""
        effects.append(table)
        return f"dropped {table}"

    return agent


async def approval_turn(database_url: str) -> dict[str, Any]:
    effects: list[str] = []
    verdicts: list[Any] = []
    async with Service.open(
        database_url, agents=[adopt(judged_desk(effects, verdicts))], model="scripted"
    ) as svc:
        conversation = await svc.start_conversation("ops_desk")
        run = await svc.send(conversation.id, SCRIPT)
        await svc.run_until_idle()
        pending = await svc.pending(conversation_id=conversation.id)
        for call in pending:
            await svc.resolve(call.correlation_id, "approve")
        await svc.run_until_idle()
        done = (await svc.get_run(run.id)).run
    return {
        "pydantic-ai-slim": version("pydantic-ai-slim"),
        "pydantic-ai-harness": version("pydantic-ai-harness"),
        "pending": [(c.tool_name, c.kind) for c in pending],
        "status": done.status,
        "effects": effects,
        "verdicts": [(v.tool_name, v.verdict) for v in verdicts],
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(approval_turn(sys.argv[1])), default=str))
