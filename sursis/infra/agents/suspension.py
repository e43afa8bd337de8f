"""The second link of the tool path: a call that waits for someone suspends here.

A call the policy asks about waits for an approval (`ApprovalRequired`, the decision in its
metadata); a call of a `human` or `client` tool waits for its answer (`CallDeferred`, after its
approval when it is gated: such a call suspends twice). A call dispatched again after its segment
died runs as nobody's approval unless an earlier dispatch passed the gate: a tool that gates itself
asks again (`redispatch`). A denied call waits for nobody.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.exceptions import ApprovalRequired

from sursis.domain.tools import Executor, PendingKind
from sursis.infra.agents.compat import call_deferred
from sursis.infra.agents.redispatch import cleared_before, not_approved
from sursis.infra.agents.tool_chain import POLICY, ToolCall, WrapperLink


class Suspension(WrapperLink):
    """The approval and suspension of a call, then the next link."""

    __slots__ = ()

    async def __call__(self, call: ToolCall) -> Any:
        if call.asks is not None:
            raise ApprovalRequired(metadata={"kind": PendingKind.APPROVAL.value, POLICY: call.asks.to_json()})
        if call.denied:
            return await self.next(call)
        spec = call.spec
        external = spec.external_kind()
        if external is not None:
            raise call_deferred(
                {"kind": external.value}, "question" if spec.executor is Executor.HUMAN else "external"
            )
        if (
            call.redispatched
            and call.ctx.tool_call_approved
            and not await cleared_before(call.deps, call.call, call.args)
        ):
            # The dispatch of a segment that died is nobody's approval: a tool that gates itself
            # must ask again, not run (see `redispatch`).
            with not_approved(call.call.tool_call_id):
                return await self.next(call)
        return await self.next(call)
