"""`pydantic_ai_examples.ag_ui.api.agentic_chat`: the AG-UI chat agent (unnamed, no deps), served over
Sursis's API instead of its Starlette app, its `current_time` tool gated."""

from __future__ import annotations

from pydantic_ai_examples.ag_ui.api import agentic_chat as example

from sursis import ToolOptions, adopt

AGENT = adopt(
    example.agent,
    name="agentic-chat",
    model="scripted",
    tools={
        "current_time": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Read the time in {timezone}"
        )
    },
)
