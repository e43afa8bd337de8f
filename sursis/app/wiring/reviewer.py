"""The reviewer loop from the settings: budgets per workspace (parts of `wire_policy`); reviewers' models
are built from their names by the agents' `BuiltModels`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sursis.app.context_settings import PolicySettings
from sursis.app.wiring.storage import StorageParts
from sursis.domain.reviewer import ReviewerBudget
from sursis.infra.policy.reviewer import PydanticAiReviewer, ReviewerLoop


def budget_for(settings: PolicySettings) -> Callable[[str], ReviewerBudget]:
    default = ReviewerBudget(settings.reviewer_calls_per_minute, settings.reviewer_tokens_per_day)

    def of(workspace: str) -> ReviewerBudget:
        own = settings.reviewer_budgets.get(workspace)
        if own is None:
            return default
        return ReviewerBudget(
            default.calls_per_minute if own.calls_per_minute is None else own.calls_per_minute,
            default.tokens_per_day if own.tokens_per_day is None else own.tokens_per_day,
        )

    return of


def reviewer_loop(
    settings: PolicySettings,
    storage: StorageParts,
    reviewer: PydanticAiReviewer,
    clock: Callable[[], datetime],
) -> ReviewerLoop:
    return ReviewerLoop(
        storage.uow,
        reviewer,
        budget_for(settings),
        clock=clock,
        poll_seconds=settings.reviewer_poll_seconds,
        hearing=storage.hearing,
    )
