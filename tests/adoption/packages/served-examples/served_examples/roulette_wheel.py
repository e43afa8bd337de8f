"""`pydantic_ai_examples.roulette_wheel`: a `bool` output, the winning number in its deps, its
`roulette_wheel` tool gated."""

from __future__ import annotations

from pydantic_ai_examples import roulette_wheel as example

from sursis import RunInfo, ToolOptions, adopt


def roulette_deps(info: RunInfo) -> example.Deps:
    return example.Deps(winning_number=18)


AGENT = adopt(
    example.roulette_agent,
    name="roulette-wheel",
    model="scripted",
    deps=roulette_deps,
    tools={
        "roulette_wheel": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Spin the wheel for square {square}"
        )
    },
)
