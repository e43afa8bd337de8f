"""Running another served agent inside a tool call, so that a suspension inside it suspends the whole
chain and resumes inside it, exactly once.

The inner agent's message log is stored per calling tool call (`delegations`). When the inner agent
ends with deferred calls, its log is stored `suspended` and the tool raises `defer_nested`: the run
parks on the inner agent's calls. When the run resumes, the runner dispatches the calling tool call
again; the stored log and the decisions on the inner pending calls then make the
`DeferredToolResults` the inner agent continues from. A worker killed while resuming leaves the log
as it was, so the next one resumes from the same point. A completed inner run's output is stored
with its log, so a calling tool dispatched again (its own outcome not recorded yet) gets it without
running the inner agent a second time.

`run_agent(ctx, agent, prompt)` is the helper an adopted agent's tool calls instead of
`agent.run(prompt, deps=ctx.deps, usage=ctx.usage)`; the built-in supervisor's `delegate` tool runs
its specialists the same way.
"""

from __future__ import annotations

import dataclasses
import json
from contextlib import AsyncExitStack
from contextvars import ContextVar
from typing import Any, cast

from opentelemetry import trace
from pydantic import TypeAdapter
from pydantic_ai import RunContext
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_core import to_json

from sursis.domain.errors import ToolTerminalError
from sursis.infra.agents.agent_deps import OpenedDeps
from sursis.infra.agents.nested import DeferredTarget, defer_nested, requested_targets
from sursis.infra.agents.resumed import deferred_results, unanswered_tool_calls
from sursis.infra.agents.run_deps import RunDeps, current_run_deps, run_deps
from sursis.infra.db.delegation_repository import Delegation
from sursis.infra.db.uow import SqlUnitOfWork, SqlUnitOfWorkFactory
from sursis.infra.faults import crash_point

MESSAGES: TypeAdapter[list[ModelMessage]] = TypeAdapter(list[ModelMessage])
PATH_SEPARATOR = "/"
_path: ContextVar[str | None] = ContextVar("sursis_agent_path", default=None)
"""The path from the conversation's agent to the agent running now, while an inner agent runs."""


def agent_path(caller: str, agent: str) -> str:
    """`customer/framework-advisor`: from the conversation's agent down to `agent`."""
    return f"{_path.get() or caller}{PATH_SEPARATOR}{agent}"


class NestedRuns:
    """Start, suspend, resume and finish an inner agent's run for one calling tool call."""

    def __init__(self, uow: SqlUnitOfWorkFactory) -> None:
        self._uow = uow

    async def run(
        self, ctx: RunContext[Any], agent: str, prompt: str, path: str, span: trace.Span | None = None
    ) -> Any:
        """The inner agent's output; raises `defer_nested` while it waits for its pending calls."""
        deps = run_deps(ctx)
        call_id = ctx.tool_call_id or ""
        async with self._uow() as uow:
            record = await uow.delegations.get(deps.conversation_id, call_id)
        if record is not None and record.status == "completed":
            _mark(span, "replayed")
            return _stored_output(record)
        history: list[ModelMessage] | None = None
        results: DeferredToolResults | None = None
        if record is not None and record.status == "suspended":
            history = MESSAGES.validate_json(record.messages)
            _, tail = unanswered_tool_calls(history)
            targets = [DeferredTarget.from_json(t) for t in (record.deferred or {}).get("targets", [])]
            ids = {p.tool_call_id for p in tail} | {t.tool_call_id for t in targets}
            async with self._uow() as uow:
                rows = await uow.pending.by_tool_call_ids(deps.conversation_id, sorted(ids))
            if {t.tool_call_id for t in targets} - {r.tool_call_id for r in rows}:
                # Stored, but the run died before its pending calls were: ask for them again.
                raise defer_nested(targets)
            # A call of the inner agent that itself runs an agent has no pending call of its own (its
            # agent's calls have): it is dispatched again and resumes that agent the same way.
            results = deferred_results(tail, rows, abandoned=False)
            crash_point("delegation_resumed")
            _mark(span, "resumed")
        else:
            record = await self._start(deps, call_id, agent, prompt)
        inner: AbstractAgent[Any, Any] | None = deps.agents.get(agent)
        if inner is None:
            raise ToolTerminalError(f"agent {agent!r} is not served here")
        service = dataclasses.replace(deps, agent_name=agent, progress=None)
        token = current_run_deps.set(service)
        path_token = _path.set(path)
        try:
            async with AsyncExitStack() as stack:
                factory = deps.agent_deps.get(agent)
                if factory is not None and deps.run_info is not None:
                    # The inner agent's own deps, opened for this step as for a run of its own.
                    info = dataclasses.replace(deps.run_info, agent=agent)
                    own: Any = await stack.enter_async_context(OpenedDeps(factory, info))
                else:
                    own = service if isinstance(ctx.deps, RunDeps) else ctx.deps
                result = await inner.run(
                    prompt if history is None else None,
                    message_history=history,
                    deferred_tool_results=results,
                    deps=own,
                    usage=ctx.usage,
                )
        finally:
            _path.reset(path_token)
            current_run_deps.reset(token)
        record.messages = MESSAGES.dump_json(result.all_messages()).decode()
        record.updated_at = deps.clock()
        output = result.output
        if isinstance(output, DeferredToolRequests):
            targets = requested_targets(agent, path, output)
            record.status = "suspended"
            record.deferred = {"targets": [t.to_json() for t in targets]}
            await self._save(record, deps, "delegation.suspended", {"pending": len(targets)})
            crash_point("delegation_suspended")
            _mark(span, "suspended")
            raise defer_nested(targets)
        record.status = "completed"
        record.output = output if isinstance(output, str) else to_json(output).decode()
        record.deferred = None if isinstance(output, str) else {"output_json": True}
        await self._save(record, deps, "delegation.completed", {"output_chars": len(record.output)})
        return output

    async def _start(self, deps: RunDeps, call_id: str, agent: str, prompt: str) -> Delegation:
        now = deps.clock()
        record = Delegation(
            conversation_id=deps.conversation_id,
            tool_call_id=call_id,
            run_id=deps.run_id,
            specialist=agent,
            status="running",
            messages="[]",
            deferred=None,
            output=None,
            created_at=now,
            updated_at=now,
        )
        await self._save(record, deps, "delegation.started", {"task": prompt[:500]})
        return record

    async def _save(self, record: Delegation, deps: RunDeps, action: str, details: dict[str, Any]) -> None:
        async with self._uow() as uow:
            await uow.delegations.save(record)
            await _audit(uow, deps, record, action, details)
            await uow.commit()


def _stored_output(record: Delegation) -> Any:
    if (record.deferred or {}).get("output_json"):
        return json.loads(record.output or "null")
    return record.output or ""


def _mark(span: trace.Span | None, what: str) -> None:
    if span is not None:
        span.set_attribute(f"sursis.delegation.{what}", True)


async def _audit(
    uow: SqlUnitOfWork, deps: RunDeps, record: Delegation, action: str, details: dict[str, Any]
) -> None:
    recorded = {
        "specialist": record.specialist,
        "tool_call_id": record.tool_call_id,
        **json.loads(json.dumps(details, default=str)),
    }
    await uow.audit.append(deps.audit_entry(action, f"agent:{deps.agent_name}", recorded), deps.clock())


async def run_agent(ctx: RunContext[Any], agent: AbstractAgent[Any, Any] | str, prompt: str) -> Any:
    """Run another served agent from a tool of an adopted agent, as one step of this call.

    What pydantic-ai's `await agent.run(prompt, deps=ctx.deps, usage=ctx.usage)` does, made durable:
    a call the inner agent's tools leave waiting (an approval, an answer) suspends the whole run; once
    decided, the run resumes inside the inner agent, which continues from its stored log, exactly
    once. Its usage counts towards the run's, and its spans are nested under this call's. `agent` is
    a served agent or its name; the agent's output is returned (a structured output that was stored
    before a crash comes back as its JSON form).
    """
    deps = run_deps(ctx)
    name = agent if isinstance(agent, str) else agent.name
    if not name:
        raise ToolTerminalError("run_agent needs a served agent with a name")
    path = agent_path(deps.agent_name, name)
    tracer = deps.tracer or trace.get_tracer(__name__)
    with tracer.start_as_current_span(
        f"delegate {path}",
        attributes={
            "sursis.delegation.specialist": name,
            "sursis.delegation.agent_path": path,
            "sursis.delegation.tool_call_id": ctx.tool_call_id or "",
        },
    ) as span:
        runs = NestedRuns(cast(SqlUnitOfWorkFactory, deps.uow))
        return await runs.run(ctx, name, prompt, path, span)
