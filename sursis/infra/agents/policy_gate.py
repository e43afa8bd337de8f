"""What the tool wrapper does with the policy point: ask it (failing closed), tell approvers of a
`notify` call before it runs, and make a denied call's typed error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_core import to_jsonable_python

from sursis.domain.errors import ToolPolicyError
from sursis.domain.events import EventType, publish
from sursis.domain.policies import unavailable
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.sanitize import args_hash, sanitize
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.run_deps import RunDeps

log = structlog.get_logger("sursis.tools")

NOTIFIED = "policy.notified"
"""Audit action (and event type) of a call the policy let run with its approvers told after."""


async def decide(deps: RunDeps, spec: ToolSpec, tool_call_id: str, args: Mapping[str, Any]) -> PolicyDecision:
    """The point's decision; one it cannot make asks for the call (fail closed)."""
    try:
        return await deps.policy.decide(deps, spec, args)
    except Exception:
        log.exception("policy.unavailable", tool_name=spec.name, tool_call_id=tool_call_id)
        return unavailable(spec)


async def notify(
    deps: RunDeps, spec: ToolSpec, tool_call_id: str, args: Mapping[str, Any], decision: PolicyDecision
) -> None:
    """A call that runs now, its approvers told after: an audit row and a `policy.notified` event,
    committed before it runs (so a crash after it does not tell them twice)."""
    jsonable = to_jsonable_python(dict(args))
    if deps.before_effect is not None:
        await deps.before_effect()
    now = deps.clock()
    details = {
        "tool_name": spec.name,
        "tool_call_id": tool_call_id,
        "args_summary": sanitize(jsonable),
        "args_hash": args_hash(spec.name, jsonable),
        "policy": decision.to_json(),
    }
    async with deps.uow() as uow:
        await uow.audit.append(
            deps.audit_entry(NOTIFIED, f"policy:{decision.rule or 'default'}", details), now
        )
        event = {"run_id": str(deps.run_id), "agent": deps.agent_name, **details}
        await publish(uow, deps.conversation_id, deps.workspace, EventType.POLICY_NOTIFIED, event, now)
        await uow.commit()


def denied(decision: PolicyDecision) -> WrapToolExecuteHandler:
    """The handler of a denied call: it raises the typed error the model is shown."""

    async def deny(_args: dict[str, Any]) -> Any:
        reason = decision.reason or f"the policy's rule {decision.rule!r} denies this call"
        raise ToolPolicyError(f"Denied by policy: {reason}", code="POLICY_DENIED")

    return deny
