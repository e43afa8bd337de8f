"""Adopted agents with each kind of output pydantic-ai declares (`SURSIS_AGENTS=tests.adoption.
output_agents:AGENTS`): an output validator, an output function (`ToolOutput`), `TextOutput`,
`NativeOutput`, `PromptedOutput`, a union and a plain structured type.

Each has the gated tool `hold_seat`; its model (a `FunctionModel`) calls it first, then gives its
output. The validated agent's first output is refused by its validator (`ModelRetry`) and given again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, NativeOutput, PromptedOutput, RunContext, TextOutput, ToolOutput
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

HELD: list[str] = []


class Itinerary(BaseModel):
    city: str
    nights: int
    confirmed: bool = False


class Refusal(BaseModel):
    reason: str


class Booking(BaseModel):
    reference: str
    city: str
    nights: int


ITINERARY = '{"city": "Paris", "nights": 3}'

Final = Callable[[AgentInfo, bool], ModelResponse]


def _tool(index: int, args: dict[str, Any]) -> Final:
    return lambda info, retried: ModelResponse(parts=[ToolCallPart(info.output_tools[index].name, args)])


def _text(text: str) -> Final:
    return lambda info, retried: ModelResponse(parts=[TextPart(text)])


def _refused(part: Any) -> bool:
    """A part telling the model its output was refused (pydantic-ai 2.x sends a failed tool return)."""
    return isinstance(part, RetryPromptPart) or (
        isinstance(part, ToolReturnPart) and part.outcome in ("failed", "retried")
    )


def _model(final: Final) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart("hold_seat", {"city": "Paris"})])
        last = messages[-1]
        retried = isinstance(last, ModelRequest) and any(_refused(p) for p in last.parts)
        return final(info, retried)

    return FunctionModel(respond)


def _agent(name: str, output_type: Any, final: Final) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(_model(final), name=name, output_type=output_type)

    @agent.tool_plain(requires_approval=True)
    def hold_seat(city: str) -> str:
        """Hold a seat on the next flight to a city."""
        HELD.append(city)
        return f"seat held to {city}"

    return agent


def _validated_final(info: AgentInfo, retried: bool) -> ModelResponse:
    city = "Paris" if retried else "paris"
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"city": city, "nights": 3})])


validated = _agent("validated", Itinerary, _validated_final)


@validated.output_validator
def _check(ctx: RunContext[Any], output: Itinerary) -> Itinerary:
    if output.city != output.city.title():
        raise ModelRetry("Write the city's name with a capital letter.")
    return output.model_copy(update={"confirmed": True})


def confirm_booking(ctx: RunContext[Any], city: str, nights: int) -> Booking:
    """Confirm the booking."""
    return Booking(reference=f"BK-{city[:3].upper()}-{nights}", city=city, nights=nights)


def words(text: str) -> list[str]:
    return text.split()


AGENTS = [
    validated,
    _agent(
        "function-output",
        ToolOutput(confirm_booking, name="confirm"),
        _tool(0, {"city": "Paris", "nights": 3}),
    ),
    _agent("text-output", TextOutput(words), _text("Paris for three nights")),
    _agent("native-output", NativeOutput(Itinerary), _text(ITINERARY)),
    _agent("prompted-output", PromptedOutput(Itinerary), _text(ITINERARY)),
    _agent("union-output", [Refusal, Itinerary], _tool(1, {"city": "Paris", "nights": 3})),
    _agent("int-output", int, _tool(0, {"response": 3})),
]

EXPECTED = {
    "validated": {"city": "Paris", "nights": 3, "confirmed": True},
    "function-output": {"reference": "BK-PAR-3", "city": "Paris", "nights": 3},
    "text-output": ["Paris", "for", "three", "nights"],
    "native-output": {"city": "Paris", "nights": 3, "confirmed": False},
    "prompted-output": {"city": "Paris", "nights": 3, "confirmed": False},
    "union-output": {"city": "Paris", "nights": 3, "confirmed": False},
    "int-output": 3,
}
"""Each agent's output, as JSON."""
