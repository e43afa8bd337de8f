"""Where reviews are kept: queued with the suspension, claimed, settled, read with the calls."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sursis.domain.reviewer import Review, ReviewEffect, ReviewResult


class ReviewRepository(Protocol):
    async def queue(self, reviews: Sequence[Review]) -> None:
        """Insert the reviews of calls just suspended (outcome `queued`)."""
        ...

    async def reviews(self, correlation_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Review]: ...
    async def queued(self, limit: int) -> list[Review]:
        """Queued reviews, oldest first."""
        ...

    async def claim(self, correlation_id: uuid.UUID, now: datetime) -> bool:
        """`queued` → `reviewing`, unless another process claimed it first."""
        ...

    async def claim_within_budget(
        self,
        correlation_id: uuid.UUID,
        workspace: str,
        now: datetime,
        minute_start: datetime,
        day_start: datetime,
    ) -> tuple[int, int] | None:
        """`claim`, then what the workspace spent (`spent`, the claim not counted), with the
        workspace's claims serialized until the transaction ends: the budget check and the claim are
        one step, so no two processes spend the same remainder. None: another process claimed it."""
        ...

    async def spent(self, workspace: str, minute_start: datetime, day_start: datetime) -> tuple[int, int]:
        """The workspace's reviewer calls claimed since `minute_start`, tokens used since `day_start`."""
        ...

    async def settle(self, correlation_id: uuid.UUID, result: ReviewResult, now: datetime) -> bool:
        """Record the verdict (or why there is none) of a review not settled yet."""
        ...

    async def set_effect(self, correlation_id: uuid.UUID, effect: ReviewEffect) -> None: ...
    async def add_tokens(self, correlation_id: uuid.UUID, tokens: int) -> None:
        """Count the tokens of a model answer that came after its review was settled (budget)."""
        ...

    async def stuck(self, claimed_before: datetime, limit: int) -> list[Review]:
        """Reviews claimed before `claimed_before` and never settled (their process stopped)."""
        ...
