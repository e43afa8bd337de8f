"""`pydantic_ai_examples.flight_booking`: the search agent (an output validator, a tool running the
extraction agent on that agent's own model) with the example's own flights page and request as deps,
its `extract_flights` tool gated."""

from __future__ import annotations

import datetime

from pydantic_ai_examples import flight_booking as example

from sursis import RunInfo, ToolOptions, adopt


def flight_deps(info: RunInfo) -> example.Deps:
    return example.Deps(
        web_page_text=example.flights_web_page,
        req_origin="SFO",
        req_destination="ANC",
        req_date=datetime.date(2025, 1, 10),
    )


AGENT = adopt(
    example.search_agent,
    name="flight-booking",
    model="scripted",
    deps=flight_deps,
    tools={
        "extract_flights": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Read the flights off the booking site"
        )
    },
)
