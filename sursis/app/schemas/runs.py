"""Runs and their usage."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from sursis.app.schemas.pending import PendingCallOut, pending_out
from sursis.domain.records import (
    Principal,
    Run,
    Usage,
)
from sursis.domain.runs.runs import RunView


class UsageOut(BaseModel):
    requests: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    estimated_cost_usd: float | None = Field(
        description="From the model's published prices; null when the model has no known price."
    )


class RunOut(BaseModel):
    id: uuid.UUID
    conversation_id: uuid.UUID
    status: str
    output: Any = Field(
        description=(
            "The agent's output as JSON: the text of its answer (a string), or its structured output "
            "(an object, an array, a number…) as its output type declares it; null until it ends."
        )
    )
    error: dict[str, str] | None
    pending: list[PendingCallOut]
    usage: UsageOut
    created_at: datetime
    finished_at: datetime | None


class ResolvedOut(PendingCallOut):
    """A decided pending call, and with `?wait=` its run."""

    run: RunOut | None = Field(
        default=None,
        description=(
            "With `?wait=`: the call's run once it settled (the next suspension or the end) or as it "
            "was when `wait` ran out. Null without `wait`, or when the run could not be read after "
            "the decision was committed."
        ),
    )


def resolved_out(call: PendingCallOut, run: RunOut | None) -> ResolvedOut:
    return ResolvedOut(**dict(call), run=run)


def run_out(view: RunView, principal: Principal) -> RunOut:
    """By hand on purpose: a run is shown with its awaiting calls as the caller may see them."""
    run: Run = view.run
    return RunOut(
        id=run.id,
        conversation_id=run.conversation_id,
        status=run.status.value,
        output=run.output_value(),
        error={"code": run.error.code, "message": run.error.message} if run.error else None,
        pending=[pending_out(p, principal) for p in view.pending],
        usage=usage_out(run.usage),
        created_at=run.created_at,
        finished_at=run.finished_at,
    )


def usage_out(usage: Usage) -> UsageOut:
    """By hand on purpose: the API shows the cost as `estimated_cost_usd`, a number."""
    return UsageOut(
        requests=usage.requests,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        tool_calls=usage.tool_calls,
        estimated_cost_usd=None if usage.cost is None else float(usage.cost),
    )
