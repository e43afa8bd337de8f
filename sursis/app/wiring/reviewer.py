"""The reviewer loop and model, from the settings: models built from their names as the agents'
are (`build_model`), budgets per workspace (parts of `wire_policy`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pydantic_ai.models import Model

from sursis.app.settings import Settings
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.reviewer import ReviewerBudget
from sursis.infra.agents.models import build_model
from sursis.infra.policy.reviewer import PydanticAiReviewer, ReviewerLoop


def reviewer_models(settings: Settings) -> Callable[[str], Model]:
    """A reviewer's model by name, built once per name."""
    built: dict[str, Model] = {}

    def named(name: str) -> Model:
        if name not in built:
            key = settings.openai_api_key
            built[name] = build_model(
                name,
                openai_base_url=settings.openai_base_url,
                openai_api_key=key.get_secret_value() if key else None,
            )
        return built[name]

    return named


def budget_for(settings: Settings) -> Callable[[str], ReviewerBudget]:
    default = ReviewerBudget(settings.reviewer_calls_per_minute, settings.reviewer_tokens_per_day)

    def of(workspace: str) -> ReviewerBudget:
        own = settings.reviewer_budgets.get(workspace)
        if own is None:
            return default
        return ReviewerBudget(
            own.get("calls_per_minute", default.calls_per_minute),
            own.get("tokens_per_day", default.tokens_per_day),
        )

    return of


def reviewer_loop(
    settings: Settings, uow: UnitOfWorkFactory, reviewer: PydanticAiReviewer, clock: Callable[[], datetime]
) -> ReviewerLoop:
    return ReviewerLoop(
        uow, reviewer, budget_for(settings), clock=clock, poll_seconds=settings.reviewer_poll_seconds
    )
