"""Running a specialist for the supervisor, so that a suspension inside it suspends the whole run
and resumes inside it, exactly once.

The specialist's message log is stored per `delegate` call (`delegations`). When the specialist
ends with deferred calls, its log is stored `suspended` and the tool raises `defer_nested`: the
run parks on the specialist's calls. When the run resumes, the runner dispatches the `delegate`
call again; the stored log and the decisions on the specialist's pending calls then make the
`DeferredToolResults` the specialist continues from. A worker killed while resuming leaves the log
as it was, so the next one resumes from the same point; the specialist's mutating tools use their
`tool_call_id` as idempotency key, so nothing is applied twice.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from opentelemetry import trace
from pydantic import TypeAdapter
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from sursis.domain.errors import ToolPolicyError, ToolTerminalError
from sursis.infra.agents.nested import DeferredTarget, defer_nested, requested_targets
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.db.delegation_repository import Delegation
from sursis.infra.db.uow import SqlUnitOfWork, SqlUnitOfWorkFactory
from sursis.infra.faults import crash_point
from sursis.infra.runner.resume import deferred_results, unanswered_tool_calls

MESSAGES: TypeAdapter[list[ModelMessage]] = TypeAdapter(list[ModelMessage])
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
    """The supervisor's `delegate` tool body: start, suspend, resume and finish a specialist."""

    def __init__(self, uow: SqlUnitOfWorkFactory, supervisor: str, specialists: tuple[str, ...]) -> None:
        self._uow = uow
        self._supervisor = supervisor
        self._specialists = specialists

    def path(self, specialist: str) -> str:
        return f"{self._supervisor}/{specialist}"

    async def delegate(self, ctx: RunContext[RunDeps], specialist: str, task: str) -> dict[str, Any]:
        call_id = ctx.tool_call_id or ""
        if delegation_position(ctx.messages, call_id, self._specialists) >= MAX_DELEGATIONS_PER_TURN:
            raise ToolPolicyError(
                f"at most {MAX_DELEGATIONS_PER_TURN} specialists may be consulted per turn; "
                "answer from the findings you have",
                code="DELEGATION_LIMIT",
            )
        tracer = ctx.deps.tracer or trace.get_tracer(__name__)
        with tracer.start_as_current_span(
            f"delegate {self.path(specialist)}",
            attributes={
                "sursis.delegation.specialist": specialist,
                "sursis.delegation.agent_path": self.path(specialist),
                "sursis.delegation.tool_call_id": call_id,
            },
        ) as span:
            findings = await self._run(ctx, specialist, task, span)
        return {"specialist": specialist, "findings": findings}

    async def _run(self, ctx: RunContext[RunDeps], specialist: str, task: str, span: trace.Span) -> str:
        deps = ctx.deps
        call_id = ctx.tool_call_id or ""
        async with self._uow() as uow:
            record = await uow.delegations.get(deps.conversation_id, call_id)
        if record is not None and record.status == "completed":
            span.set_attribute("sursis.delegation.replayed", True)
            return record.output or ""
        history: list[ModelMessage] | None = None
        results: DeferredToolResults | None = None
        if record is not None and record.status == "suspended":
            history = MESSAGES.validate_json(record.messages)
            _, tail = unanswered_tool_calls(history)
            async with self._uow() as uow:
                rows = await uow.pending.by_tool_call_ids(
                    deps.conversation_id, [p.tool_call_id for p in tail]
                )
            if {p.tool_call_id for p in tail} - {r.tool_call_id for r in rows}:
                # Stored, but the run died before its pending calls were: ask for them again.
                raise defer_nested(
                    [DeferredTarget.from_json(t) for t in (record.deferred or {}).get("targets", [])]
                )
            results = deferred_results(tail, rows, abandoned=False)
            crash_point("delegation_resumed")
            span.set_attribute("sursis.delegation.resumed", True)
        else:
            record = await self._start(deps, call_id, specialist, task)
        agent: Agent[RunDeps, str | DeferredToolRequests] | None = deps.agents.get(specialist)
        if agent is None:
            raise ToolTerminalError(f"specialist {specialist!r} is not available")
        result = await agent.run(
            task if history is None else None,
            message_history=history,
            deferred_tool_results=results,
            deps=dataclasses.replace(deps, agent_name=specialist, progress=None),
            usage=ctx.usage,
        )
        record.messages = MESSAGES.dump_json(result.all_messages()).decode()
        record.updated_at = deps.clock()
        output = result.output
        if isinstance(output, DeferredToolRequests):
            targets = requested_targets(specialist, self.path(specialist), output)
            record.status = "suspended"
            record.deferred = {"targets": [t.to_json() for t in targets]}
            await self._save(record, deps, "delegation.suspended", {"pending": len(targets)})
            crash_point("delegation_suspended")
            span.set_attribute("sursis.delegation.suspended", True)
            raise defer_nested(targets)
        record.status = "completed"
        record.output = output
        await self._save(record, deps, "delegation.completed", {"output_chars": len(output)})
        return output

    async def _start(self, deps: RunDeps, call_id: str, specialist: str, task: str) -> Delegation:
        now = deps.clock()
        record = Delegation(
            conversation_id=deps.conversation_id,
            tool_call_id=call_id,
            run_id=deps.run_id,
            specialist=specialist,
            status="running",
            messages="[]",
            deferred=None,
            output=None,
            created_at=now,
            updated_at=now,
        )
        await self._save(record, deps, "delegation.started", {"task": task[:500]})
        return record

    async def _save(self, record: Delegation, deps: RunDeps, action: str, details: dict[str, Any]) -> None:
        async with self._uow() as uow:
            await uow.delegations.save(record)
            await _audit(uow, deps, record, action, details)
            await uow.commit()


async def _audit(
    uow: SqlUnitOfWork, deps: RunDeps, record: Delegation, action: str, details: dict[str, Any]
) -> None:
    recorded = {
        "specialist": record.specialist,
        "tool_call_id": record.tool_call_id,
        **json.loads(json.dumps(details, default=str)),
    }
    await uow.audit.append(deps.audit_entry(action, f"agent:{deps.agent_name}", recorded), deps.clock())
