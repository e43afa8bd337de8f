"""The first link of the tool path: the policy point's decision on a call, acted on before it runs.

The point is asked (failing closed); a pre-approval and a `notify` are written down before the call
runs (an approver of a `notify` call is told), a denied call runs a typed error in place of its tool,
and an ask is handed on to the suspension link. A call on an operator's approval is not asked again:
its arguments are checked against the approved ones and it runs on the decision that asked for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import structlog
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_core import to_jsonable_python

from sursis.domain.authorizations import UnsealedPreApproval
from sursis.domain.decision_seal import SEAL
from sursis.domain.errors import ToolPolicyError
from sursis.domain.events import EventType, publish
from sursis.domain.policies import authorization_of, governed, unavailable
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.sanitize import args_hash, sanitize
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.approved_args import Mismatch, check_dispatch, refuse
from sursis.infra.agents.call_marks import AUTO_APPROVED, NOTIFIED
from sursis.infra.agents.lift_seals import facts_of_lift, lift_sealer
from sursis.infra.agents.redispatch import cleared_before
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.agents.tool_chain import POLICY, ToolCall, ToolLink, WrapperLink

log = structlog.get_logger("sursis.tools")


class ServerReview(Protocol):
    """Who reviews the decision on a call of a discovered server's tool (its MCP servers')."""

    def review(self, spec: ToolSpec, decision: PolicyDecision) -> PolicyDecision:
        """The decision, asked instead when the tool is not what was accepted."""
        ...


class PolicyGate(WrapperLink):
    """The policy gate: the call's decision, found and acted on, then the next link."""

    __slots__ = ("_servers",)

    def __init__(self, next: ToolLink, servers: ServerReview | None = None) -> None:
        super().__init__(next)
        self._servers = servers

    async def __call__(self, call: ToolCall) -> Any:
        if call.ctx.tool_call_approved and not call.redispatched:
            await check_dispatch(call.deps, call.call, call.metadata, call.args)
            # The decision that asked for the call; the approval answered it.
            stamped = call.metadata.get(POLICY)
            call.decision = PolicyDecision.from_json(stamped) if isinstance(stamped, Mapping) else None
        elif governed(call.spec):
            await self._gate(call)
        return await self.next(call)

    async def _gate(self, call: ToolCall) -> None:
        deps, spec, part, args = call.deps, call.spec, call.call, call.args
        decision = await decide(deps, spec, part, args)
        if self._servers is not None and spec.server is not None:
            decision = self._servers.review(spec, decision)
        cleared = decision.effect is PolicyEffect.ALLOW and authorization_of(decision) is None
        if not cleared and call.redispatched and await cleared_before(deps, part, args):
            return  # An earlier dispatch passed the gate (it ran, or was cleared): not asked again.
        call.decision = decision
        if decision.effect is PolicyEffect.ASK:
            call.asks = decision
            return
        if not await _cleared(deps, spec, part, args, decision):
            call.asks = unavailable(spec)
            return
        if decision.effect is PolicyEffect.DENY:
            call.handler, call.denied = denied(decision), True


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


def denied(decision: PolicyDecision) -> WrapToolExecuteHandler:
    """The handler of a denied call: it raises the typed error the model is shown."""

    async def deny(_args: dict[str, Any]) -> Any:
        reason = decision.reason or f"the policy's rule {decision.rule!r} denies this call"
        raise ToolPolicyError(f"Denied by policy: {reason}", code="POLICY_DENIED")

    return deny


async def _cleared(
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
