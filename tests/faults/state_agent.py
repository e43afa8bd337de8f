"""An adopted agent whose deps carry a `StateDeps` (`SURSIS_AGENTS=tests.faults.state_agent:AGENTS`):
`load` adds a table to the state, the gated `publish` reports what the state holds when it runs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.ui import StateDeps

from sursis import adopt


class Frames(BaseModel):
    loaded: list[str] = []


analyst: Agent[StateDeps[Frames], str] = Agent(name="analyst", deps_type=StateDeps[Frames])


@analyst.tool
def load(ctx: RunContext[StateDeps[Frames]], table: str) -> str:
    """Load a table."""
    ctx.deps.state.loaded.append(table)
    return f"Out[{len(ctx.deps.state.loaded)}]"


@analyst.tool(requires_approval=True)
def publish(ctx: RunContext[StateDeps[Frames]], ref: str) -> dict[str, Any]:
    """Publish a loaded frame."""
    return {"ref": ref, "loaded": list(ctx.deps.state.loaded)}


AGENTS = [adopt(analyst, deps=lambda info: StateDeps(Frames()))]
