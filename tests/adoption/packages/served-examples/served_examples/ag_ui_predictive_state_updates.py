"""`pydantic_ai_examples.ag_ui.api.predictive_state_updates`: the document agent, its
`StateDeps[DocumentState]` (instructions reading the state) built per run, its
`document_predict_state` tool (returning a list of AG-UI `CustomEvent`s) gated."""

from __future__ import annotations

from pydantic_ai.ui import StateDeps
from pydantic_ai_examples.ag_ui.api import predictive_state_updates as example

from sursis import RunInfo, ToolOptions, adopt


def document_deps(info: RunInfo) -> StateDeps[example.DocumentState]:
    return StateDeps(example.DocumentState())


AGENT = adopt(
    example.agent,
    name="predictive-state-updates",
    model="scripted",
    deps=document_deps,
    tools={
        "document_predict_state": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Turn on document state prediction"
        )
    },
)
