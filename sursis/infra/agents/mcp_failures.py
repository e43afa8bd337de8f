"""How an MCP call fails: a server that is down (named to the model), a server that died while a
call ran, and a call whose outcome nobody knows (a pending call for a person)."""

from __future__ import annotations

from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import ToolCallPart

from sursis.domain.errors import ToolTransientError
from sursis.domain.tools import PendingKind, ToolSpec
from sursis.infra.agents.compat import call_deferred
from sursis.infra.agents.observed import REVIEW
from sursis.infra.agents.run_deps import RunDeps

DISPATCHED = "mcp.dispatched"
"""Audit action written, and committed, before a call of a tool that is not `read` is sent."""
OUTCOME_UNKNOWN = "outcome_unknown"
CONNECTION_CLOSED = -32000
"""The MCP SDK's error code for a connection that closed (the server process died)."""
_AUDIT_PAGE = 200


def server_unavailable(server: str, reason: str) -> ToolTransientError:
    """What the model reads when a call's server is down: the server named, the call not sent."""
    return ToolTransientError(
        f"The MCP server {server!r} is unavailable ({reason}); this call was not completed. "
        "The agent's other tools still work.",
        code="MCP_SERVER_UNAVAILABLE",
    )


def server_died(exc: BaseException) -> bool:
    """Whether an error of a call means its server's connection is gone (the process died)."""
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(seen, "code", None) == CONNECTION_CLOSED:
            return True
        if type(seen).__name__ in ("ClosedResourceError", "BrokenResourceError", "EndOfStream"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def outcome_unknown(spec: ToolSpec, *, died: bool = False) -> CallDeferred:
    """A person's answer stands for the result of a call the server may or may not have received."""
    what = (
        f"The MCP server {spec.server!r} stopped while this call ran"
        if died
        else f"The service stopped after sending this call to the MCP server {spec.server!r}"
    )
    review = {
        OUTCOME_UNKNOWN: (
            f"{what}, before its result was recorded: it may or may not have taken effect. It is not "
            "sent again. Check, then answer with what the agent should be told, or decline."
        )
    }
    return call_deferred({"kind": PendingKind.ELICITATION.value, REVIEW: review}, "question")


async def dispatched_before(deps: RunDeps, tool_call_id: str) -> bool:
    async with deps.uow.reader() as uow:
        after_id: int | None = None
        while True:
            rows = await uow.audit.search(
                workspace=deps.workspace,
                conversation_id=deps.conversation_id,
                correlation_id=None,
                actions=(DISPATCHED,),
                since=None,
                after_id=after_id,
                limit=_AUDIT_PAGE,
                newest_first=True,
            )
            if any(row.details.get("tool_call_id") == tool_call_id for row in rows):
                return True
            if len(rows) < _AUDIT_PAGE:
                return False
            after_id = rows[-1].id


async def mark_dispatched(deps: RunDeps, spec: ToolSpec, call: ToolCallPart) -> None:
    details = {
        "tool_call_id": call.tool_call_id,
        "tool_name": spec.name,
        "server": spec.server,
        "schema_digest": spec.schema_digest,
    }
    async with deps.uow() as uow:
        await uow.audit.append(
            deps.audit_entry(DISPATCHED, f"agent:{deps.agent_name}", details), deps.clock()
        )
        await uow.commit()
