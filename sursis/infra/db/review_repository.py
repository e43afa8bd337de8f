"""Reviewer verdicts in SQL (`pending_reviews`); the reason is sealed like a vote's."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.reviewer import Review, ReviewEffect, ReviewOutcome, ReviewResult
from sursis.infra.db.held import flush_held
from sursis.infra.db.repositories.base import SqlRepository, rowcount
from sursis.infra.db.review_tables import pending_reviews
from sursis.infra.db.sealing import REVIEWS

_c = pending_reviews.c
_OPEN = (ReviewOutcome.QUEUED.value, ReviewOutcome.REVIEWING.value)
_LOCK_WORKSPACE = sa.text("SELECT pg_advisory_xact_lock(:key)")


def _workspace_key(workspace: str) -> int:
    """The advisory lock of a workspace's reviewer budget: 8 bytes of a hash of a labelled name."""
    digest = hashlib.sha256(f"sursis.reviewer-budget:{workspace}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class SqlReviewRepository(SqlRepository):
    async def _execute(self, statement: Any, params: Any = None) -> Any:
        await flush_held(self._session)
        return await self._session.execute(statement, params)

    def _review(self, row: Any) -> Review:
        m = REVIEWS.open(self._cipher, row)
        return Review(
            correlation_id=m["correlation_id"],
            workspace=m["workspace"],
            model=m["model"],
            question=m["question"],
            outcome=ReviewOutcome(m["outcome"]),
            created_at=m["created_at"],
            policy_version=m["policy_version"],
            rule=m["rule"],
            reason=m["reason"],
            effect=ReviewEffect(m["effect"]) if m["effect"] else None,
            tokens=m["tokens"],
            decided_at=m["decided_at"],
        )

    async def queue(self, reviews: Sequence[Review]) -> None:
        if not reviews:
            return
        rows = [
            REVIEWS.seal(
                self._cipher,
                {
                    "correlation_id": r.correlation_id,
                    "workspace": r.workspace,
                    "model": r.model,
                    "question": r.question,
                    "policy_version": r.policy_version,
                    "rule": r.rule,
                    "outcome": r.outcome.value,
                    "reason": r.reason,
                    "effect": None,
                    "tokens": 0,
                    "created_at": r.created_at,
                    "claimed_at": None,
                    "decided_at": r.decided_at,
                },
            )
            for r in reviews
        ]
        await self._execute(pending_reviews.insert(), rows)

    async def reviews(self, correlation_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Review]:
        if not correlation_ids:
            return {}
        rows = await self._execute(
            sa.select(pending_reviews).where(_c.correlation_id.in_(list(correlation_ids)))
        )
        return {r.correlation_id: r for r in map(self._review, rows)}

    async def queued(self, limit: int) -> list[Review]:
        rows = await self._execute(
            sa.select(pending_reviews)
            .where(_c.outcome == ReviewOutcome.QUEUED.value)
            .order_by(_c.created_at)
            .limit(limit)
        )
        return [self._review(r) for r in rows]

    async def claim(self, correlation_id: uuid.UUID, now: datetime) -> bool:
        result = await self._execute(
            pending_reviews.update()
            .where(_c.correlation_id == correlation_id, _c.outcome == ReviewOutcome.QUEUED.value)
            .values(outcome=ReviewOutcome.REVIEWING.value, claimed_at=now)
        )
        return rowcount(result) == 1

    async def claim_within_budget(
        self,
        correlation_id: uuid.UUID,
        workspace: str,
        now: datetime,
        minute_start: datetime,
        day_start: datetime,
    ) -> tuple[int, int] | None:
        if not await self.claim(correlation_id, now):
            return None
        if self._postgres:
            # Serializes the workspace's claims to the commit (SQLite: the claim's write lock does).
            await self._execute(_LOCK_WORKSPACE, {"key": _workspace_key(workspace)})
        calls, tokens = await self.spent(workspace, minute_start, day_start)
        return calls - 1, tokens

    async def spent(self, workspace: str, minute_start: datetime, day_start: datetime) -> tuple[int, int]:
        calls = sa.func.count().filter(_c.claimed_at >= minute_start)
        tokens = sa.func.coalesce(sa.func.sum(_c.tokens).filter(_c.decided_at >= day_start), 0)
        row = (
            await self._execute(
                sa.select(calls, tokens).where(_c.workspace == workspace, _c.claimed_at >= day_start)
            )
        ).one()
        return int(row[0]), int(row[1])

    async def settle(self, correlation_id: uuid.UUID, result: ReviewResult, now: datetime) -> bool:
        outcome, reason, tokens = result
        values = REVIEWS.seal(
            self._cipher,
            {"outcome": outcome.value, "reason": reason, "tokens": tokens, "decided_at": now},
            {"correlation_id": correlation_id},
        )
        result = await self._execute(
            pending_reviews.update()
            .where(_c.correlation_id == correlation_id, _c.outcome.in_(_OPEN))
            .values(**values)
        )
        return rowcount(result) == 1

    async def set_effect(self, correlation_id: uuid.UUID, effect: ReviewEffect) -> None:
        await self._execute(
            pending_reviews.update().where(_c.correlation_id == correlation_id).values(effect=effect.value)
        )

    async def add_tokens(self, correlation_id: uuid.UUID, tokens: int) -> None:
        if tokens:
            await self._execute(
                pending_reviews.update()
                .where(_c.correlation_id == correlation_id)
                .values(tokens=_c.tokens + tokens)
            )

    async def stuck(self, claimed_before: datetime, limit: int) -> list[Review]:
        rows = await self._execute(
            sa.select(pending_reviews)
            .where(_c.outcome == ReviewOutcome.REVIEWING.value, _c.claimed_at < claimed_before)
            .order_by(_c.claimed_at)
            .limit(limit)
        )
        return [self._review(r) for r in rows]
