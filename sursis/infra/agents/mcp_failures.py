"""How an MCP call fails: a server that is down (named to the model), a server that died while a
call ran, and a call whose outcome nobody knows (a pending call for a person)."""

from __future__ import annotations

from pydantic_ai.exceptions import CallDeferred

from sursis.domain.errors import ToolTransientError
from sursis.domain.tools import ToolSpec
from sursis.infra.agents import call_marks
from sursis.infra.agents.call_marks import DispatchMark

DISPATCHED = "mcp.dispatched"
"""Audit action written, and committed, before a call of a tool that is not `read` is sent."""
CONNECTION_CLOSED = -32000
"""The MCP SDK's error code for a connection that closed (the server process died)."""


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
    return call_marks.outcome_unknown(
        f"{what}, before its result was recorded: it may or may not have taken effect. It is not "
        "sent again. Check, then answer with what the agent should be told, or decline."
    )


MCP = DispatchMark(DISPATCHED, "mcp", "sursis.mcp", outcome_unknown, names_server=True)
"""The mark of a call of an MCP tool that is not `read` (nor declared idempotent)."""
