"""Retention purges a conversation's votes, routing and reviews with its pending calls, on SQLite and
PostgreSQL; the workspace's approver groups stay."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from sursis.domain.clock import utcnow
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.retention.retention import RetentionPolicy, RetentionService
from sursis.domain.reviewer import ReviewerSpec
from sursis.infra.db import approver_tables as ap
from sursis.infra.db import review_tables as rv
from tests.routing.kit import ADMIN, routing_service

UNSURE = ReviewerSpec("scripted", "Is it risky?")
"""A reviewer whose scripted model has no script: it answers `ECHO: ...`, read as `unsure`."""


async def test_a_purge_takes_the_votes_and_routes_of_the_conversation(database_url: str) -> None:
    async with routing_service(
        database_url, {"P1": ApprovalRoute(groups=("finance",), quorum=2, reviewer=UNSURE)}
    ) as people:
        for name in ("ann", "bob", "rex"):
            await people.key(name)
        await people.group("finance", "ann", "bob")
        call = await people.ask("rex", "P1")
        await people.vote("ann", call)
        await people.vote("bob", call)
        assert "refunded" in await people.output(call)  # the run ended: the conversation is idle

        async def rows() -> dict[str, int]:
            async with people.svc.container.uow.engine.connect() as conn:
                return {
                    table.name: int(
                        (await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one()
                    )
                    for table in (ap.pending_votes, ap.pending_routes, rv.pending_reviews, ap.approver_groups)
                }

        assert await rows() == {
            "pending_votes": 2,
            "pending_routes": 1,
            "pending_reviews": 1,
            "approver_groups": 1,
        }
        retention = RetentionService(people.svc.container.uow, lambda: utcnow() + timedelta(days=3))
        await retention.set_policy(ADMIN, RetentionPolicy("default", conversation_days=2))
        [report] = await retention.run(ADMIN, "default")
        assert report.conversations == 1
        assert (
            report.rows["pending_votes"],
            report.rows["pending_routes"],
            report.rows["pending_reviews"],
        ) == (
            2,
            1,
            1,
        )
        assert await rows() == {
            "pending_votes": 0,
            "pending_routes": 0,
            "pending_reviews": 0,
            "approver_groups": 1,
        }
