"""The capabilities an adopted agent brings (pydantic-ai's own, pydantic-ai-harness's, a team's):
they run as the agent's author wrote them, except two kinds the service cannot serve, refused when
the agent is adopted (at start-up), in one line naming the capability and why:

* one that decides deferred tool calls inside the run (`handle_deferred_tool_calls`: pydantic-ai's
  `HandleDeferredToolCalls`, the harness's `ApprovalReviewer`): it would approve a gated call
  without the policy point, its approvers and its audit row;
* a durable-execution capability (pydantic-ai's `BaseDurabilityCapability`: the harness's
  `PGTaskDurability`, `AbsurdDurability`, ...): the service already stores and resumes every run,
  and a second engine would replay what the first replays.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.combined import CombinedCapability


def refused_capability(agent: AbstractAgent[Any, Any]) -> str | None:
    """Why the service cannot serve `agent` with one of its capabilities; None when it can."""
    for capability in capability_leaves(agent):
        name = type(capability).__name__
        if _decides_deferred_calls(capability):
            return (
                f"capability {name} decides gated tool calls inside the run, past the service's "
                "policy point, approvers and audit: serve the agent without it (a reviewer model is "
                "a rung of a policy route)"
            )
        if _is_durability(capability):
            return (
                f"capability {name} runs the agent in a durable-execution engine of its own, and the "
                "service already stores and resumes every run: serve the agent without it"
            )
    return None


def capability_leaves(agent: AbstractAgent[Any, Any]) -> Iterator[AbstractCapability[Any]]:
    """The agent's capabilities, those combined into one listed one by one."""
    return _leaves(getattr(agent, "root_capability", None))


def _leaves(capability: Any) -> Iterator[AbstractCapability[Any]]:
    if isinstance(capability, CombinedCapability):
        for inner in capability.capabilities:
            yield from _leaves(inner)
    elif isinstance(capability, AbstractCapability):
        yield capability


def _decides_deferred_calls(capability: AbstractCapability[Any]) -> bool:
    base = getattr(AbstractCapability, "handle_deferred_tool_calls", None)
    own = getattr(type(capability), "handle_deferred_tool_calls", None)
    return base is not None and own is not base


def _is_durability(capability: AbstractCapability[Any]) -> bool:
    durable = sys.modules.get("pydantic_ai.durable_exec")  # imported by whatever made such a capability
    base = getattr(durable, "BaseDurabilityCapability", None)
    return base is not None and isinstance(capability, base)
