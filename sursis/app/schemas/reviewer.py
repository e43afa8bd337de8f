"""A route's reviewer as the API takes and shows it; a call's review; a simulation's reviewer counts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator

from sursis.app.schemas.validation import Strict
from sursis.domain.reviewer import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_HISTORY,
    MAX_QUESTION_CHARS,
    Review,
    ReviewerActs,
    ReviewerSpec,
)


class ReviewerIn(Strict):
    """A model asked one risk question before people: its `no` approves (`acts: approve`) or counts
    as one vote of the route's quorum (`acts: vote`); it never denies."""

    model: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9_.:/@-]+$",
        description="A model name as SURSIS_MODEL takes it (`openai:gpt-4.1-mini`, `scripted`, ...)",
    )
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, description="`yes` means risky")
    acts: ReviewerActs = ReviewerActs.APPROVE
    history: int = Field(default=0, ge=0, le=MAX_HISTORY, description="Latest text messages it may read")
    timeout_seconds: float = Field(default=DEFAULT_TIMEOUT_SECONDS, gt=0, le=300)

    def to_spec(self) -> ReviewerSpec:
        return ReviewerSpec(self.model, self.question, self.acts, self.history, self.timeout_seconds)


class ReviewerOut(BaseModel):
    model: str
    question: str
    acts: str
    history: int
    timeout_seconds: float


class ReviewOut(BaseModel):
    """The reviewer's verdict on the call (`yes` risky, `no`, `unsure`; or why there is none:
    `error`, `timeout`, `over_budget`, `interrupted`, `skipped`; `queued`/`reviewing` while it
    thinks), its short reason and what it did (`approved`, `voted`, `stale`, `left_to_people`)."""

    model: str
    question: str
    verdict: str
    reason: str | None
    effect: str | None
    policy_version: int | None
    rule: str | None
    decided_at: datetime | None

    @model_validator(mode="before")
    @classmethod
    def _from_review(cls, data: Any) -> Any:
        return data.to_json() if isinstance(data, Review) else data


class ReviewerSimulationOut(BaseModel):
    reviewed: int = Field(description="Asks put to a reviewer model")
    would_approve: int = Field(description="Asks the reviewer would have taken off people's plates")
    would_vote: int = Field(description="Asks where it would have cast one vote of a quorum")
    left_to_people: int
    not_reviewed: int = Field(description="Asks beyond `max_reviews`, not put to a model")
    verdicts: dict[str, int]
    examples: list[dict[str, Any]]
