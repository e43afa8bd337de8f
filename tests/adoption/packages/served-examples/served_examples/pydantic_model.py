"""`pydantic_ai_examples.pydantic_model`: text to a pydantic model (`MyModel`), no deps. The example has
no tool: the team serving it adds one that looks a place up in its own gazetteer, gated."""

from __future__ import annotations

from pydantic_ai_examples import pydantic_model as example

from sursis import ToolOptions, adopt

GAZETTEER = {"the windy city": {"city": "Chicago", "country": "United States"}}


@example.agent.tool_plain
def look_up_place(nickname: str) -> dict[str, str] | None:
    """The city and country a nickname names in the team's gazetteer, if it knows it."""
    return GAZETTEER.get(nickname.lower())


AGENT = adopt(
    example.agent,
    name="pydantic-model",
    model="scripted",
    tools={
        "look_up_place": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Look {nickname} up in the gazetteer"
        )
    },
)
