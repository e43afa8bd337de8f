"""At most once, or a person is asked: an adopted tool that changes things and is not idempotent.

The service cannot see what an adopted agent's tool does, so it cannot make its effect and its
recorded outcome one transaction (the built-in tools do: `effects.record_effect`). Before such a
tool runs, its dispatch is marked (`TOOL`, a `call_marks.DispatchMark`). When a call comes back
without a recorded outcome and its newest mark is a dispatch, the tool may have acted: the call
becomes an "outcome unknown" pending call for a person, as an MCP tool's call does, instead of a
second run. A call whose last dispatch ended in a suspension (the tool gated itself) is not in
doubt: its `pending.requested` row is newer.

Not marked, so run again with the same `tool_call_id`: tools declared `read`, and tools declared
`ToolOptions(idempotent=True)` (they key their effect on `ctx.tool_call_id`). A tool nobody
categorised is marked too: nobody said a second run is harmless. A call that runs another agent
(`run_agent`) and comes back after that agent waited is not in doubt either: the inner run resumes
exactly once from its delegation record (`delegated.py`).
"""

from __future__ import annotations

from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import ToolCallPart

from sursis.domain.tools import ToolSpec
from sursis.infra.agents import call_marks
from sursis.infra.agents.call_marks import DispatchMark
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.db.uow import SqlUnitOfWork

DISPATCHED = "tool.dispatched"
"""Audit action written, and committed, before an at-most-once tool runs."""
REQUESTED = "pending.requested"
"""The audit action of a suspension: a dispatch that ended in one did not act."""


def outcome_unknown(spec: ToolSpec) -> CallDeferred:
    """A person's answer stands for the result of a call that may or may not have acted."""
    return call_marks.outcome_unknown(
        f"The service stopped while the tool {spec.name!r} was running, before its result was "
        "recorded: it may or may not have taken effect. It is not run again (the tool is not "
        "declared idempotent). Check, then answer with what the agent should be told, or decline."
    )


TOOL = DispatchMark(DISPATCHED, "tool", "sursis.tools", outcome_unknown, settled_by=(REQUESTED,))
"""The mark of an adopted tool that runs at most once per call."""


async def dispatching(deps: RunDeps, spec: ToolSpec, call: ToolCallPart, *, again: bool) -> None:
    """`TOOL.dispatching`: the call marked, unless it is in doubt; one in doubt that resumes the
    agent it ran runs unmarked, one that does not is the "outcome unknown" deferral. The delegation is
    read only for a call in doubt: a call that is not (the newest mark of a call just approved is its
    `pending.requested`) is marked, whether it ran an agent or not, and costs no read of it."""
    await TOOL.dispatching(
        deps, spec, call, again=again, resumes=lambda: resumes_an_agent(deps, call.tool_call_id)
    )


async def resumes_an_agent(deps: RunDeps, tool_call_id: str) -> bool:
    """Whether a call dispatched again is the resume of the agent it ran (its delegation is stored):
    that run continues exactly once, so the call is not in doubt."""
    async with deps.uow.reader() as uow:
        if not isinstance(uow, SqlUnitOfWork):
            return False  # a unit of work without delegations runs no agent from a tool
        return await uow.delegations.get(deps.conversation_id, tool_call_id) is not None
