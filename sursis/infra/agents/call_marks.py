"""The marks a tool call leaves in the audit log, read back after a crash.

A mark is an audit row (committed) whose details name the call's `tool_call_id`. Two readers ask
"what is the newest mark of this call": the wrapper, whether an earlier dispatch of a redispatched
call already passed the gate (`pending.auto_approved`, `policy.notified`); and a call whose effect
the service cannot see (an adopted tool that is not idempotent, an MCP tool that is not `read`),
whether an earlier dispatch of it may have acted (`DispatchMark`).

A dispatch mark is written before such a call runs. When the call comes back without a recorded
outcome (its worker died, or the database went away, while it ran) and its newest mark is a
dispatch, the call may have acted: it becomes an "outcome unknown" pending call for a person
instead of a second run. One implementation serves both kinds; each keeps its own audit action
(`tool.dispatched`, `mcp.dispatched`), log event and crash point.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import ToolCallPart

from sursis.domain.ports import AuditRepository, HeldConditionFailed
from sursis.domain.records import AuditEntry, AuditQuery
from sursis.domain.tools import PendingKind, ToolSpec
from sursis.infra.agents.compat import call_deferred
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.faults import crash_point

AUTO_APPROVED = "pending.auto_approved"
"""Audit action of a call a pre-approval (a standing authorization) cleared; where decisions are
sealed its details carry the lift's seal (`domain/decision_seal.lift_facts`)."""
NOTIFIED = "policy.notified"
"""Audit action (and event type) of a call the policy let run with its approvers told after."""
REVIEW = "review"
"""Deferral metadata: what a gated tool asks the person deciding to check (a JSON object); the
pending call shows it with the call's arguments under this key."""
OUTCOME_UNKNOWN = "outcome_unknown"
"""The key, in `REVIEW`, of the text that tells a person a call may or may not have acted."""
_FIRST_PAGE = 8
"""Rows read first: a call's newest mark is almost always among the newest few of its conversation
(the call was just approved, or dispatched by the segment that died). The row count of a longer
conversation no longer decides what a resume reads and decrypts."""
_PAGE = 200


async def newest_mark(
    audit: AuditRepository, deps: RunDeps, tool_call_id: str, actions: tuple[str, ...]
) -> str | None:
    """The action of the newest audit row of the segment's conversation among `actions` that names
    the call, or None when there is none."""
    entry = await newest_mark_entry(audit, deps, tool_call_id, actions)
    return entry.action if entry is not None else None


async def newest_mark_entry(
    audit: AuditRepository, deps: RunDeps, tool_call_id: str, actions: tuple[str, ...]
) -> AuditEntry | None:
    """The newest audit row of the segment's conversation among `actions` that names the call."""
    after_id: int | None = None
    page = _FIRST_PAGE
    while True:
        query = AuditQuery(
            conversation_id=deps.conversation_id,
            actions=actions,
            after_id=after_id,
            limit=page,
            newest_first=True,
        )
        rows = await audit.search(deps.workspace, query)
        for row in rows:
            if row.details.get("tool_call_id") == tool_call_id:
                return row
        if len(rows) < page:
            return None
        after_id = rows[-1].id
        page = _PAGE


def outcome_unknown(text: str) -> CallDeferred:
    """A person's answer stands for the result of a call that may or may not have acted; `text`
    tells them why it is in doubt."""
    review = {OUTCOME_UNKNOWN: text}
    return call_deferred({"kind": PendingKind.ELICITATION.value, REVIEW: review}, "question")


@dataclass(frozen=True, slots=True)
class DispatchMark:
    """One kind of dispatch mark: its audit action, what it is named in logs and crash points, and
    what the person is told of a call in doubt."""

    action: str
    """The audit action written, and committed, before the call runs."""
    name: str
    """`{name}.outcome_unknown` is logged; `{name}_dispatched:{tool}` is the crash point after it."""
    logger: str
    doubt: Callable[[ToolSpec], CallDeferred]
    """The "outcome unknown" deferral of a call whose earlier dispatch may have acted."""
    settled_by: tuple[str, ...] = ()
    """Audit actions that, newer than the dispatch, say it did not act (a suspension)."""
    names_server: bool = False
    """The mark's details name the tool's server and its schema digest."""

    async def in_doubt(self, deps: RunDeps, tool_call_id: str) -> bool:
        """Whether the newest mark of the call is a dispatch (not a settling row after it)."""
        async with deps.uow.reader() as uow:
            newest = await newest_mark(uow.audit, deps, tool_call_id, (self.action, *self.settled_by))
        return newest == self.action

    async def dispatching(
        self,
        deps: RunDeps,
        spec: ToolSpec,
        call: ToolCallPart,
        *,
        again: bool,
        resumes: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """Mark the call as dispatched, or raise the "outcome unknown" deferral when an earlier
        dispatch of it may have acted. `again`: the call may have been dispatched before (a resumed
        or redispatched call); a call of the segment's own model response never was. `resumes`,
        asked only of a call in doubt: whether it is not in doubt after all (it resumes what it
        ran exactly once); then it runs without a new mark."""
        details: dict[str, Any] = {"tool_call_id": call.tool_call_id, "tool_name": spec.name}
        if self.names_server:
            details |= {"server": spec.server, "schema_digest": spec.schema_digest}
        entry = deps.audit_entry(self.action, f"agent:{deps.agent_name}", details)
        if not (again and await self._marked_unless_in_doubt(deps, entry, call.tool_call_id)):
            if again and await self.in_doubt(deps, call.tool_call_id):
                if resumes is not None and await resumes():
                    return
                structlog.get_logger(self.logger).warning(
                    f"{self.name}.outcome_unknown", tool_name=spec.name, tool_call_id=call.tool_call_id
                )
                raise self.doubt(spec)
            async with deps.uow() as uow:
                await uow.audit.append(entry, deps.clock())
                await uow.commit()
        crash_point(f"{self.name}_dispatched:{spec.name}")

    async def _marked_unless_in_doubt(self, deps: RunDeps, entry: AuditEntry, tool_call_id: str) -> bool:
        """The mark written by the statement that asks whether the call is in doubt, where the
        store can (`AuditRepository.append_unless_newest`); False, nothing written: in doubt, or
        not told there (`in_doubt` tells)."""
        async with deps.uow() as uow:
            among = (self.action, *self.settled_by)
            held = await uow.audit.append_unless_newest(
                entry, deps.clock(), among=among, naming=tool_call_id, unless=self.action
            )
            if not held:
                return False
            try:
                await uow.commit()
            except HeldConditionFailed:
                return False
        return True
