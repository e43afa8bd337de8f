"""What the tool wrapper does with the policy point: ask it (failing closed), act on its decision
before the call runs (an ask suspends it, a pre-approval and a `notify` are written down first), tell
approvers of a `notify` call, make a denied call's typed error, and tell whether an earlier dispatch
of a redispatched call already passed the gate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ToolCallPart
from pydantic_core import to_jsonable_python

from sursis.domain.authorizations import UnsealedPreApproval
from sursis.domain.decision_seal import SEAL, lift_facts
from sursis.domain.encryption import Cipher
from sursis.domain.errors import ToolPolicyError
from sursis.domain.events import EventType, publish
from sursis.domain.policies import authorization_of, unavailable
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.sanitize import args_hash, sanitize
from sursis.domain.tools import PendingKind, ToolSpec
from sursis.infra.agents.approved_args import Mismatch, refuse
from sursis.infra.agents.call_marks import newest_mark_entry
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.encryption.decision_seal import DecisionSealer, sealer_of

log = structlog.get_logger("sursis.tools")

NOTIFIED = "policy.notified"
"""Audit action (and event type) of a call the policy let run with its approvers told after."""
AUTO_APPROVED = "pending.auto_approved"
"""Audit action of a call a pre-approval (a standing authorization) cleared; where decisions are
sealed its details carry the lift's seal (`domain/decision_seal.lift_facts`)."""
POLICY = "policy"
"""Deferral metadata: the policy decision that asks for the call (`PolicyDecision.to_json()`); the
pending call keeps it."""


async def decide(
    deps: RunDeps, spec: ToolSpec, call: ToolCallPart, args: Mapping[str, Any]
) -> PolicyDecision:
    """The point's decision, drawn for a `sampled` rung; one it cannot make asks for the call (fail
    closed). A pre-approval that would lift the call but is not sealed by the service runs nothing:
    the finding is written and the run fails (`approved_args.refuse`)."""
    try:
        decision = await deps.policy.decide(deps, spec, args)
        return deps.policy.drawn(deps, spec, call.tool_call_id, decision)
    except UnsealedPreApproval as forged:
        hashed = args_hash(spec.name, to_jsonable_python(dict(args)))
        await refuse(deps, Mismatch.unsealed_lift(call, hashed, forged.authorization_id, forged.problem))
    except Exception:
        log.exception("policy.unavailable", tool_name=spec.name, tool_call_id=call.tool_call_id)
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


async def apply(
    deps: RunDeps, spec: ToolSpec, call: ToolCallPart, args: Mapping[str, Any], decision: PolicyDecision
) -> None:
    """Act on a decision before the call runs: an ask suspends it; a pre-approval and a notify
    are written down first (a call they cleared is not asked again after a crash)."""
    if decision.effect is PolicyEffect.ASK:
        raise ApprovalRequired(metadata={"kind": PendingKind.APPROVAL.value, POLICY: decision.to_json()})
    authorization = authorization_of(decision)
    try:
        if authorization is not None:
            await _audit_auto_approval(deps, spec, call, args, authorization)
        elif decision.effect is PolicyEffect.NOTIFY:
            await notify(deps, spec, call.tool_call_id, args, decision)
    except Exception:
        # Fail closed: a clearance that cannot be recorded asks for the call instead.
        event = "pre_approval.unavailable" if authorization is not None else "policy.unavailable"
        log.exception(event, tool_name=spec.name, tool_call_id=call.tool_call_id)
        raise ApprovalRequired(
            metadata={"kind": PendingKind.APPROVAL.value, POLICY: unavailable(spec).to_json()}
        ) from None


async def cleared_before(deps: RunDeps, call: ToolCallPart, args: Mapping[str, Any]) -> bool:
    """Whether an earlier dispatch of this call (a segment that died) already passed the gate.

    A redispatched call carries no approval of its own, so the gate is asked again, unless the
    call has a stored outcome (it ran; the wrapper replays it) or a pre-approval (or a `notify`
    rule) was recorded for it. That recorded clearance holds, like an operator's approval: the
    call is not gated a second time and no second `pending.auto_approved` (`policy.notified`)
    row is written, even if the authorization or the policy has changed since. Where decisions are
    sealed, a recorded lift holds only when its seal checks for this call and these arguments;
    otherwise nothing runs and the run fails (`approved_args.refuse`).
    """
    async with deps.uow() as uow:
        if await uow.tool_calls.get(deps.conversation_id, call.tool_call_id) is not None:
            return True
        marks = (AUTO_APPROVED, NOTIFIED)
        mark = await newest_mark_entry(uow.audit, deps, call.tool_call_id, marks)
    if mark is None:
        return False
    if mark.action == AUTO_APPROVED:
        sealer = _sealer(deps)
        if sealer.enabled:
            authorization = str(mark.details.get("authorization_id"))
            hashed = args_hash(call.tool_name, to_jsonable_python(dict(args)))
            facts = _lift_facts(deps, call.tool_call_id, call.tool_name, hashed, authorization)
            problem = sealer.problem(facts, mark.details.get(SEAL), "pre-approval's lift")
            if problem is not None:
                await refuse(deps, Mismatch.unsealed_lift(call, hashed, authorization, problem))
    return True


def _sealer(deps: RunDeps) -> DecisionSealer:
    """The decision sealer of the keyring the segment's units of work hold (off without one)."""
    cipher: Cipher | None = getattr(deps.uow, "cipher", None)
    return sealer_of(cipher) if cipher is not None else DecisionSealer.off()


def _lift_facts(
    deps: RunDeps, tool_call_id: str, tool_name: str, hashed: str, authorization: str
) -> dict[str, Any]:
    conversation = str(deps.conversation_id)
    return lift_facts(deps.workspace, conversation, tool_call_id, tool_name, hashed, authorization)


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
        seal = _sealer(deps).seal(_lift_facts(deps, call.tool_call_id, spec.name, hashed, authorization))
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
