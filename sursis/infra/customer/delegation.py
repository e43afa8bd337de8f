"""Running a specialist for the supervisor, so that a suspension inside it suspends the whole run
and resumes inside it, exactly once (`sursis.infra.agents.delegated.NestedRuns`, which an adopted
agent's tools use too). The specialist's mutating tools use their `tool_call_id` as idempotency
key, so nothing is applied twice. Here: which specialists exist and how many one turn may consult.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, UserPromptPart

from sursis.domain.errors import ToolPolicyError, ToolUserError
from sursis.infra.agents.delegated import MESSAGES, NestedRuns, agent_path
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.db.uow import SqlUnitOfWorkFactory

__all__ = ["DELEGATE", "MAX_DELEGATIONS_PER_TURN", "MESSAGES", "Delegations", "delegation_position"]

DELEGATE = "delegate"
MAX_DELEGATIONS_PER_TURN = 2


def delegation_position(messages: list[ModelMessage], tool_call_id: str, specialists: tuple[str, ...]) -> int:
    """How many delegations to a known specialist this turn made before this one.

    Counted over the turn's responses in order, so the answer is the same however often the call
    is dispatched (a resumed or re-dispatched call gets the position it had the first time).
    """
    start = 0
    for index, message in enumerate(messages):
        if not isinstance(message, ModelResponse) and any(
            isinstance(p, UserPromptPart) for p in message.parts
        ):
            start = index
    position = 0
    for message in messages[start:]:
        if not isinstance(message, ModelResponse):
            continue
        for part in message.parts:
            if not isinstance(part, ToolCallPart) or part.tool_name != DELEGATE:
                continue
            if part.tool_call_id == tool_call_id:
                return position
            if part.args_as_dict().get("specialist") in specialists:
                position += 1
    return position


class Delegations:
    """The supervisor's `delegate` tool body: the per-turn limit, then the specialist's nested run."""

    def __init__(self, uow: SqlUnitOfWorkFactory, supervisor: str, specialists: tuple[str, ...]) -> None:
        self._runs = NestedRuns(uow)
        self._supervisor = supervisor
        self._specialists = specialists

    def path(self, specialist: str) -> str:
        return agent_path(self._supervisor, specialist)

    async def delegate(self, ctx: RunContext[RunDeps], specialist: str, task: str) -> dict[str, Any]:
        call_id = ctx.tool_call_id or ""
        if specialist not in self._specialists:
            raise ToolUserError(
                f"no specialist {specialist!r}; consult one of: {', '.join(self._specialists)}",
                code="UNKNOWN_SPECIALIST",
            )
        if delegation_position(ctx.messages, call_id, self._specialists) >= MAX_DELEGATIONS_PER_TURN:
            raise ToolPolicyError(
                f"at most {MAX_DELEGATIONS_PER_TURN} specialists may be consulted per turn; "
                "answer from the findings you have",
                code="DELEGATION_LIMIT",
            )
        tracer = ctx.deps.tracer or trace.get_tracer(__name__)
        path = self.path(specialist)
        with tracer.start_as_current_span(
            f"delegate {path}",
            attributes={
                "sursis.delegation.specialist": specialist,
                "sursis.delegation.agent_path": path,
                "sursis.delegation.tool_call_id": call_id,
            },
        ) as span:
            findings = await self._runs.run(ctx, specialist, task, path, span)
        return {"specialist": specialist, "findings": findings}
