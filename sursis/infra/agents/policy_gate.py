"""The first link of the tool path: the policy point's decision on a call, acted on before it runs.

The point is asked (failing closed); a pre-approval and a `notify` are written down before the call
runs (`clearances`), a denied call runs a typed error in place of its tool, and an ask is handed on
to the suspension link. A call on an operator's approval is not asked again:
its arguments are checked against the approved ones and it runs on the decision that asked for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import structlog
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_core import to_jsonable_python

from sursis.domain.errors import ToolPolicyError
from sursis.domain.policy.authorizations import UnsealedPreApproval
from sursis.domain.policy.policies import authorization_of, governed, unavailable
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.sanitize import args_hash
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.approved_args import Mismatch, check_dispatch, refuse
from sursis.infra.agents.clearances import recorded
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
        if not await recorded(deps, spec, part, args, decision):
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
