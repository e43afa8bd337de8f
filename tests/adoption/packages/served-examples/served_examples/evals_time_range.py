"""`pydantic_ai_examples.evals`: the time range agent (a union of two models as its output, `retries=1`),
its deps at a fixed time, its `get_current_time` tool gated."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pydantic_ai_examples.evals import agent as example

from sursis import RunInfo, ToolOptions, adopt

NOW = datetime(2024, 11, 22, 23, 15, 14, tzinfo=timezone(timedelta(hours=-8), "PST"))


def time_range_deps(info: RunInfo) -> example.TimeRangeDeps:
    return example.TimeRangeDeps(now=NOW)


AGENT = adopt(
    example.time_range_agent,
    name="time-range",
    model="scripted",
    deps=time_range_deps,
    tools={
        "get_current_time": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Read the user's current time"
        )
    },
)
