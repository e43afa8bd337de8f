"""`pydantic_ai_examples.ag_ui.api.tool_approval`: the agent's own `requires_approval=True` tool and its
`output_type=[str, DeferredToolRequests]`, kept as written: Sursis asks a person for `delete_file`."""

from __future__ import annotations

from pydantic_ai_examples.ag_ui.api import tool_approval as example

from sursis import adopt

AGENT = adopt(example.agent, name="tool-approval", model="scripted")
