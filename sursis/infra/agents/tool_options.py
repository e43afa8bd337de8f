"""`ToolOptions`: what an adopted agent's tool (function or MCP) cannot say about itself, given
beside the declarations it configures (`adopt(agent, tools={...})`; re-exported as
`sursis.ToolOptions`). A module of its own so that the MCP tool specs and `adopt` both read it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sursis.domain.tools import Approval, Category, Executor


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """What the service needs to know about an adopted agent's tool besides its signature.

    `category` defaults to `mutate` for a `requires_approval` tool and `read` otherwise, but to
    `mutate` for every tool a capability brings (`capability_tools`: its author is seldom the
    agent's, and the service cannot see what the tool changes); `approval`
    to what the tool declares (`requires_approval=True` or not): a tool that gates itself by raising
    `ApprovalRequired` stays `auto`. `executor` says who answers a call the tool defers with
    `CallDeferred`: `human` (a person's answer, the default) or `client` (the caller's app).
    `idempotent=True` says the tool keys its effect on `ctx.tool_call_id` (a second run with the same
    id changes nothing more): a call whose worker died while it ran is then run again; otherwise a
    tool that is not `read` runs at most once and such a call asks a person ("outcome unknown").
    """

    category: Category | str | None = None
    effect: str | None = None
    timeout: timedelta | float | None = None
    executor: Executor | str | None = None
    approval: Approval | str | None = None
    idempotent: bool = False
