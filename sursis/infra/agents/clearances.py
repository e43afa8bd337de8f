"""What a call the policy gate clears leaves behind before it runs: a pre-approval's lift (an audit
row `pending.auto_approved`, sealed where decisions are), or a `notify` (an audit row and a
`policy.notified` event, its approvers told). Both are committed first, so a crash after them does not
ask, or tell, twice (`redispatch.cleared_before` reads them back)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from pydantic_ai.messages import ToolCallPart
from pydantic_core import to_jsonable_python

from sursis.domain.approvals.decision_seal import SEAL
from sursis.domain.events.events import EventType, publish
from sursis.domain.policy.policies import authorization_of
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.sanitize import args_hash, sanitize
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.call_marks import AUTO_APPROVED, NOTIFIED
from sursis.infra.agents.lift_seals import facts_of_lift, lift_sealer
from sursis.infra.agents.run_deps import RunDeps

log = structlog.get_logger("sursis.tools")


async def recorded(
    deps: RunDeps, spec: ToolSpec, call: ToolCallPart, args: Mapping[str, Any], decision: PolicyDecision
) -> bool:
    """A pre-approval and a notify written down before the call runs (a call they cleared is not
    asked again after a crash); False when that cannot be recorded: the call is asked instead."""
    authorization = authorization_of(decision)
    try:
        if authorization is not None:
            await _audit_auto_approval(deps, spec, call, args, authorization)
        elif decision.effect is PolicyEffect.NOTIFY:
            await notify(deps, spec, call.tool_call_id, args, decision)
    except Exception:
        event = "pre_approval.unavailable" if authorization is not None else "policy.unavailable"
        log.exception(event, tool_name=spec.name, tool_call_id=call.tool_call_id)
        return False
    return True


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


async def _audit_auto_approval(
    deps: RunDeps, spec: ToolSpec, call: ToolCallPart, args: Mapping[str, Any], authorization: str
) -> None:
    jsonable = to_jsonable_python(dict(args))
    if deps.before_effect is not None:
        await deps.before_effect()
    now = deps.clock()
    hashed = args_hash(spec.name, jsonable)
    async with deps.uow() as uow:
        details = {
            "tool_name": spec.name,
            "tool_call_id": call.tool_call_id,
            "authorization_id": authorization,
            "args_summary": sanitize(jsonable),
            "args_hash": hashed,
        }
        seal = lift_sealer(deps).seal(
            facts_of_lift(deps, call.tool_call_id, spec.name, hashed, authorization)
        )
        if seal is not None:
            details[SEAL] = seal
        await uow.audit.append(
            deps.audit_entry(AUTO_APPROVED, f"authorization:{authorization}", details), now
        )
        await uow.commit()
    log.info(
        "pre_approval.covered",
        tool_name=spec.name,
        tool_call_id=call.tool_call_id,
        authorization_id=authorization,
        run_id=str(deps.run_id),
    )
