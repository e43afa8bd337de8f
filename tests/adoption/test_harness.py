"""An adopted agent carrying pydantic-ai-harness capabilities, on the lowest pydantic-ai the service
supports (`make test-compat` installs the harness with it; skipped where the harness is not
installed). `ToolCallJudge` runs as its author wrote it, through an approval turn: the person
approves, then the judge, at execution, lets the call run or blocks it. `ApprovalReviewer`, which
would approve gated calls inside the run past the policy point, is refused at start in one line."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from sursis import Service, adopt
from sursis.domain.errors import ToolDeclarationError

harness = pytest.importorskip("pydantic_ai_harness")

EFFECTS: list[str] = []


def ops_desk(verdict: Literal["yes", "no"], seen: list[Any]) -> Agent[None, str]:
    """An agent as a team on the harness writes it: a judge in front of a destructive tool."""
    judge = harness.ToolCallJudge(
        TestModel(custom_output_args=verdict),
        tools=["drop_table"],
        question="Would this destroy data that matters?",
        on_verdict=seen.append,
    )
    agent: Agent[None, str] = Agent(name="ops_desk", capabilities=[judge])

    @agent.tool_plain(requires_approval=True)
    def drop_table(table: str) -> str:
        """Drop a table."""
        EFFECTS.append(table)
        return f"dropped {table}"

    return agent


SCRIPT = 'SCRIPT: [[{"tool": "drop_table", "args": {"table": "tmp_import"}}], "done"]'


async def _approved_turn(database_url: str, agent: Agent[None, str]) -> Any:
    async with Service.open(database_url, agents=[agent], model="scripted") as svc:
        conversation = await svc.start_conversation("ops_desk")
        run = await svc.send(conversation.id, SCRIPT)
        await svc.run_until_idle()
        [pending] = await svc.pending(conversation_id=conversation.id)
        assert (pending.tool_name, pending.kind) == ("drop_table", "approval")
        await svc.resolve(pending.correlation_id, "approve")
        await svc.run_until_idle()
        return (await svc.get_run(run.id)).run


async def test_a_tool_call_judge_lets_an_approved_call_run(database_url: str) -> None:
    EFFECTS.clear()
    seen: list[Any] = []
    run = await _approved_turn(database_url, ops_desk("no", seen))
    assert run.status == "completed", run.error
    assert EFFECTS == ["tmp_import"]
    assert [(v.tool_name, v.verdict) for v in seen] == [("drop_table", "allow")]


async def test_a_tool_call_judge_blocks_an_approved_call_it_judges_destructive(database_url: str) -> None:
    EFFECTS.clear()
    seen: list[Any] = []
    run = await _approved_turn(database_url, ops_desk("yes", seen))
    assert run.status == "completed", run.error
    assert EFFECTS == [], "the judge stopped the call before the tool ran"
    assert [(v.tool_name, v.verdict) for v in seen] == [("drop_table", "block")]


def test_an_approval_reviewer_is_refused_at_start_in_one_line() -> None:
    reviewer = harness.ApprovalReviewer(TestModel(), question="Is this risky?")
    agent = Agent(name="reviewed", capabilities=[reviewer])
    with pytest.raises(ToolDeclarationError) as caught:
        adopt(agent)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("agent 'reviewed': capability ApprovalReviewer decides gated tool calls")
