"""`pydantic_ai_examples.stream_whales`: a streamed `list[Whale]` output (a `TypedDict` with
`NotRequired` fields and constraints). The example has no tool: the team serving it adds one that
reads its own whale census, gated."""

from __future__ import annotations

from pydantic_ai_examples import stream_whales as example

from sursis import ToolOptions, adopt

CENSUS = {"Arctic": ["Bowhead whale", "Narwhal"]}


@example.agent.tool_plain
def whale_census(ocean: str) -> list[str]:
    """The whale species the team's census counts in an ocean."""
    return CENSUS.get(ocean, [])


AGENT = adopt(
    example.agent,
    name="stream-whales",
    model="scripted",
    tools={
        "whale_census": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Read the census of the {ocean}"
        )
    },
)
