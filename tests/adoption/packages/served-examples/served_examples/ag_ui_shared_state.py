"""`pydantic_ai_examples.ag_ui.api.shared_state`: the recipe agent, its `StateDeps[RecipeSnapshot]`
(instructions reading the state) built per run as the example's module builds it, its
`display_recipe` tool (returning an AG-UI `StateSnapshotEvent`) gated."""

from __future__ import annotations

from pydantic_ai.ui import StateDeps
from pydantic_ai_examples.ag_ui.api import shared_state as example

from sursis import RunInfo, ToolOptions, adopt


def recipe_deps(info: RunInfo) -> StateDeps[example.RecipeSnapshot]:
    return StateDeps(example.RecipeSnapshot())


AGENT = adopt(
    example.agent,
    name="shared-state",
    model="scripted",
    deps=recipe_deps,
    tools={
        "display_recipe": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Show the recipe to the user"
        )
    },
)
