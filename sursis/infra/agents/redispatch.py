"""A call dispatched again after its segment died is nobody's approval.

pydantic-ai hands the tool of a redispatched call (one the runner answers with `ToolApproved`, so
that it runs again under the same id) a context that says `tool_call_approved=True`. A tool that
gates itself (`if not ctx.tool_call_approved: raise ApprovalRequired`) would then run unasked. The
suspension link marks such a call here, and the toolset wrapper the tool wrapper installs hands the
tool a context that says "not approved", so the tool asks a person as it did the first time; unless
an earlier dispatch of the call already passed the gate (`cleared_before`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from copy import copy
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import to_jsonable_python

from sursis.domain.approvals.decision_seal import SEAL
from sursis.domain.sanitize import args_hash
from sursis.infra.agents.approved_args import Mismatch, refuse
from sursis.infra.agents.call_marks import AUTO_APPROVED, NOTIFIED, newest_mark_entry
from sursis.infra.agents.lift_seals import facts_of_lift, lift_sealer
from sursis.infra.agents.run_deps import RunDeps

_unapproved: ContextVar[str | None] = ContextVar("sursis_unapproved_call", default=None)


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
        sealer = lift_sealer(deps)
        if sealer.enabled:
            authorization = str(mark.details.get("authorization_id"))
            hashed = args_hash(call.tool_name, to_jsonable_python(dict(args)))
            facts = facts_of_lift(deps, call.tool_call_id, call.tool_name, hashed, authorization)
            problem = sealer.problem(facts, mark.details.get(SEAL), "pre-approval's lift")
            if problem is not None:
                await refuse(deps, Mismatch.unsealed_lift(call, hashed, authorization, problem))
    return True


@contextmanager
def not_approved(tool_call_id: str) -> Iterator[None]:
    """While inside, the tool of call `tool_call_id` is told it is not approved."""
    token = _unapproved.set(tool_call_id)
    try:
        yield
    finally:
        _unapproved.reset(token)


class UnapprovedRedispatch(WrapperToolset[Any]):
    """The agent's toolset, handing a marked call's tool a context that says it is not approved."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if ctx.tool_call_approved and ctx.tool_call_id and _unapproved.get() == ctx.tool_call_id:
            ctx = copy(ctx)
            ctx.tool_call_approved = False
        return await super().call_tool(name, tool_args, ctx, tool)
