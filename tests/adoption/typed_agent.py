"""An adopted agent whose tools return what ordinary pydantic-ai tools return: models, dataclasses,
`TypedDict`s, dates, UUIDs, decimals, enums, lists and dicts of them, a `ToolReturn` with content and
metadata, a file (`BinaryContent`), and one value nothing can store
(`SURSIS_AGENTS=tests.adoption.typed_agent:AGENTS`).

Its model (a `FunctionModel`) calls every typed tool in its first response, the gated `book_flight`
in its second, and answers in its third. Each request it is sent is written to
`$TYPED_DIR/requests.jsonl` as the model sees it (`seen`), with the conversation's first prompt; each
tool appends its name to `$TYPED_DIR/calls.log`.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel
from pydantic_ai import Agent, BinaryContent, ToolReturn
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_core import to_jsonable_python


class LatLng(BaseModel):
    lat: float
    lng: float
    measured_on: date


@dataclasses.dataclass
class FlightDetails:
    flight_number: str
    departs_at: datetime
    price: Decimal


class Seat(TypedDict):
    row: int
    letter: str


class Cabin(enum.Enum):
    ECONOMY = "economy"
    BUSINESS = "business"


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(48))
DAY = date(2026, 3, 14)
WHEN = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
BOOKING = uuid.UUID("6f1c3a52-1d43-4c1e-9a0b-6b0cde7f2f10")
PARIS = LatLng(lat=48.8566, lng=2.3522, measured_on=DAY)
FLIGHT = FlightDetails("AF1234", WHEN, Decimal("199.90"))

RETURNS: dict[str, Any] = {
    "a_model": PARIS,
    "a_dataclass": FLIGHT,
    "a_typed_dict": Seat(row=12, letter="C"),
    "a_date": DAY,
    "a_datetime": WHEN,
    "a_uuid": BOOKING,
    "a_decimal": Decimal("12.50"),
    "an_enum": Cabin.BUSINESS,
    "a_list": [PARIS, FLIGHT, DAY],
    "a_dict": {"outbound": FLIGHT, "cabin": Cabin.ECONOMY, "on": DAY},
    "a_tool_return": ToolReturn(
        return_value=PARIS,
        content=["The map of the route:", BinaryContent(data=PNG, media_type="image/png")],
        metadata={"source": "geocoder", "fetched_on": DAY, "request": BOOKING},
    ),
    "a_file": BinaryContent(data=PNG, media_type="image/png"),
    "unstorable": object(),
}
"""What each typed tool returns (`unstorable` returns a value no JSON can hold)."""

EXPECTED: dict[str, Any] = {
    "a_model": {"lat": 48.8566, "lng": 2.3522, "measured_on": "2026-03-14"},
    "a_dataclass": {"flight_number": "AF1234", "departs_at": "2026-03-14T09:30:00Z", "price": "199.90"},
    "a_typed_dict": {"row": 12, "letter": "C"},
    "a_date": "2026-03-14",
    "a_datetime": "2026-03-14T09:30:00Z",
    "a_uuid": str(BOOKING),
    "a_decimal": "12.50",
    "an_enum": "business",
    "a_list": [
        {"lat": 48.8566, "lng": 2.3522, "measured_on": "2026-03-14"},
        {"flight_number": "AF1234", "departs_at": "2026-03-14T09:30:00Z", "price": "199.90"},
        "2026-03-14",
    ],
    "a_dict": {
        "outbound": {"flight_number": "AF1234", "departs_at": "2026-03-14T09:30:00Z", "price": "199.90"},
        "cabin": "economy",
        "on": "2026-03-14",
    },
    "a_tool_return": {"lat": 48.8566, "lng": 2.3522, "measured_on": "2026-03-14"},
}
"""The JSON each tool's result is stored and shown as (a file is stored as pydantic-ai stores one)."""


def _directory() -> Path:
    return Path(os.environ["TYPED_DIR"])


def seen(content: Any) -> Any:
    """Content as the model reads it: a file by its type and digest, anything else as JSON."""
    if isinstance(content, BinaryContent):
        return {"file": content.media_type, "sha256": hashlib.sha256(content.data).hexdigest()}
    if isinstance(content, list | tuple):
        return [seen(item) for item in content]
    return to_jsonable_python(content)


def _logged(messages: list[ModelMessage], responses: int) -> None:
    first = messages[0]
    prompt = (
        next(p.content for p in first.parts if isinstance(p, UserPromptPart))
        if isinstance(first, ModelRequest)
        else None
    )
    last = messages[-1]
    parts: list[Any] = []
    if isinstance(last, ModelRequest):
        for part in last.parts:
            if isinstance(part, ToolReturnPart):
                parts.append(
                    {
                        "tool": part.tool_name,
                        "outcome": part.outcome,
                        "content": seen(part.content),
                        "metadata": to_jsonable_python(part.metadata),
                    }
                )
            elif isinstance(part, UserPromptPart):
                parts.append({"prompt": seen(part.content)})
    line = {"prompt": prompt, "responses": responses, "parts": parts}
    with (_directory() / "requests.jsonl").open("a") as log:
        log.write(json.dumps(line) + "\n")


def travel_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    responses = sum(1 for m in messages if isinstance(m, ModelResponse))
    _logged(messages, responses)
    if responses == 0:
        return ModelResponse(parts=[ToolCallPart(name, {}) for name in RETURNS])
    if responses == 1:
        return ModelResponse(parts=[ToolCallPart("book_flight", {"flight_number": "AF1234"})])
    return ModelResponse(parts=[TextPart("Booked.")])


traveller = Agent(FunctionModel(travel_model), name="traveller")


def _typed_tool(name: str) -> None:
    def tool() -> Any:
        with (_directory() / "calls.log").open("a") as calls:
            calls.write(name + "\n")
        return RETURNS[name]

    tool.__name__ = name
    tool.__doc__ = f"Return {name.replace('_', ' ')}."
    traveller.tool_plain(tool)


for _name in RETURNS:
    _typed_tool(_name)


@traveller.tool_plain(requires_approval=True)
def book_flight(flight_number: str) -> list[FlightDetails]:
    """Book a flight."""
    with (_directory() / "calls.log").open("a") as calls:
        calls.write("book_flight\n")
    return [dataclasses.replace(FLIGHT, flight_number=flight_number)]


AGENTS = [traveller]
