"""At most once, or a person is asked: an adopted tool that changes things and is not idempotent.

The service cannot see what an adopted agent's tool does, so it cannot make its effect and its
recorded outcome one transaction (the built-in tools do: `effects.record_effect`). Before such a
tool runs, its dispatch is marked (an audit row, committed). When a call comes back without a
recorded outcome (its worker died, or the database went away, while it ran) and its newest mark is
a dispatch, the tool may have acted: the call becomes an "outcome unknown" pending call for a
person, as an MCP tool's call does, instead of a second run. A call whose last dispatch ended in a
suspension (the tool gated itself) is not in doubt: its `pending.requested` row is newer.

Not marked, so run again with the same `tool_call_id`: `read` tools, and tools declared
`ToolOptions(idempotent=True)` (they key their effect on `ctx.tool_call_id`).
"""

from __future__ import annotations

import structlog
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import ToolCallPart

from sursis.domain.tools import PendingKind, ToolSpec
from sursis.infra.agents.compat import call_deferred
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.faults import crash_point

log = structlog.get_logger("sursis.tools")

DISPATCHED = "tool.dispatched"
"""Audit action written, and committed, before an at-most-once tool runs."""
REQUESTED = "pending.requested"
"""The audit action of a suspension: a dispatch that ended in one did not act."""
OUTCOME_UNKNOWN = "outcome_unknown"
REVIEW = "review"
"""`observed.REVIEW`: what the person deciding is asked to check (not imported: the wrapper imports this)."""
_PAGE = 200


async def dispatching(deps: RunDeps, spec: ToolSpec, call: ToolCallPart, *, again: bool) -> None:
    """Mark the call as dispatched, or raise the "outcome unknown" deferral when an earlier dispatch
    of it may have acted. `again`: the call may have been dispatched before (a resumed or
    redispatched call); a call of the segment's own model response never was."""
    if again and await _in_doubt(deps, call.tool_call_id):
        log.warning("tool.outcome_unknown", tool_name=spec.name, tool_call_id=call.tool_call_id)
        raise outcome_unknown(spec)
    async with deps.uow() as uow:
        details = {"tool_call_id": call.tool_call_id, "tool_name": spec.name}
        entry = deps.audit_entry(DISPATCHED, f"agent:{deps.agent_name}", details)
        await uow.audit.append(entry, deps.clock())
        await uow.commit()
    crash_point(f"tool_dispatched:{spec.name}")


def outcome_unknown(spec: ToolSpec) -> CallDeferred:
    """A person's answer stands for the result of a call that may or may not have acted."""
    review = {
        OUTCOME_UNKNOWN: (
            f"The service stopped while the tool {spec.name!r} was running, before its result was "
            "recorded: it may or may not have taken effect. It is not run again (the tool is not "
            "declared idempotent). Check, then answer with what the agent should be told, or decline."
        )
    }
    return call_deferred({"kind": PendingKind.ELICITATION.value, REVIEW: review}, "question")


async def _in_doubt(deps: RunDeps, tool_call_id: str) -> bool:
    """Whether the newest mark of the call is a dispatch (not a suspension after it)."""
    async with deps.uow.reader() as uow:
        after_id: int | None = None
        while True:
            rows = await uow.audit.search(
                workspace=deps.workspace,
                conversation_id=deps.conversation_id,
                correlation_id=None,
                actions=(DISPATCHED, REQUESTED),
                since=None,
                after_id=after_id,
                limit=_PAGE,
                newest_first=True,
            )
            for row in rows:
                if row.details.get("tool_call_id") == tool_call_id:
                    return row.action == DISPATCHED
            if len(rows) < _PAGE:
                return False
            after_id = rows[-1].id
