"""`pydantic_ai_examples.weather_agent`: its deps' HTTP client answered here (the example calls
pydantic's demo endpoints), its `get_weather` tool gated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from pydantic_ai_examples import weather_agent as example

from sursis import RunInfo, ToolOptions, adopt

DEMO_ANSWERS = {
    "/latlng": httpx.Response(200, json={"lat": 51.5, "lng": -0.12}),
    "/number": httpx.Response(200, text="21"),
    "/weather": httpx.Response(200, text="Sunny"),
}


def demo_endpoints(request: httpx.Request) -> httpx.Response:
    """The demo endpoints, offline: the same answer for every place."""
    answer = DEMO_ANSWERS.get(request.url.path)
    return httpx.Response(answer.status_code, content=answer.content) if answer else httpx.Response(404)


@asynccontextmanager
async def weather_deps(info: RunInfo) -> AsyncIterator[example.Deps]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(demo_endpoints)) as client:
        yield example.Deps(client=client)


AGENT = adopt(
    example.weather_agent,
    name="weather-agent",
    model="scripted",
    deps=weather_deps,
    tools={
        "get_weather": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Look the weather up at {lat}, {lng}"
        )
    },
)
