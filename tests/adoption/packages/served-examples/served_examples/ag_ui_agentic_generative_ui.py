"""`pydantic_ai_examples.ag_ui.api.agentic_generative_ui`: the planning agent, whose tools return AG-UI
state events (a snapshot, then JSON Patch deltas), its `create_plan` tool gated."""

from __future__ import annotations

from pydantic_ai_examples.ag_ui.api import agentic_generative_ui as example

from sursis import ToolOptions, adopt

AGENT = adopt(
    example.agent,
    name="agentic-generative-ui",
    model="scripted",
    tools={"create_plan": ToolOptions(approval="requires_approval", idempotent=True, effect="Create a plan")},
)
