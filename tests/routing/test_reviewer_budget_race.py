"""The reviewer budget race, on SQLite and PostgreSQL: two workers read the same queued review; one
claims it and asks the model while the other, finding the minute's one call spent, would mark it
`over_budget`. The claim and the budget check are one step, so the second process finds the review
claimed and leaves it alone: the model's answer is recorded (`pending.reviewed` with its tokens),
not lost. A model answer that comes after its review was settled is still on record, marked late,
with its tokens counted."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sursis.domain.clock import utcnow
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.reviewer import (
    ReviewAnswer,
    ReviewerBudget,
    ReviewerSpec,
    ReviewOutcome,
    ReviewRequest,
    Verdict,
)
from sursis.infra.policy.reviewer import ReviewerLoop
from tests.routing.kit import People
from tests.routing.test_reviewer import reviewed

ONE_A_MINUTE = ReviewerBudget(1, 100_000)
PLAIN = ApprovalRoute(reviewer=ReviewerSpec("scripted", "Is this refund unusual?"))


class Held:
    """A reviewer model that answers once released, with its tokens."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def review(self, spec: ReviewerSpec, request: ReviewRequest) -> ReviewAnswer:
        self.calls += 1
        self.asked.set()
        await self.release.wait()
        return ReviewAnswer(Verdict.UNSURE, "cannot tell", tokens=321)


def worker(people: People, model: object) -> ReviewerLoop:
    loop = ReviewerLoop(people.svc.container.uow, model, lambda _ws: ONE_A_MINUTE, clock=utcnow)  # type: ignore[arg-type]
    loop.bind(people.svc.container.pending_calls)
    return loop


async def test_a_review_another_worker_is_asking_is_not_marked_over_budget(database_url: str) -> None:
    async with reviewed(database_url, {"R1": PLAIN}) as people:
        call = await people.ask("rex", "R1")
        async with people.svc.container.uow.reader() as uow:
            [queued] = await uow.reviews.queued(10)
        model = Held()
        first = asyncio.create_task(worker(people, model).review(queued))
        await asyncio.wait_for(model.asked.wait(), 10)
        # The second worker read the same queued review before the first claimed it.
        assert await worker(people, Held()).review(queued) is None
        model.release.set()
        assert await first is ReviewOutcome.UNSURE

        shown = await people.show("ann", call)
        assert shown.review is not None and shown.review.outcome is ReviewOutcome.UNSURE
        rows = [r for r in await people.audit(call) if r.action == "pending.reviewed"]
        assert [(r.details["verdict"], r.details["tokens"]) for r in rows] == [("unsure", 321)]
        assert model.calls == 1


async def test_an_answer_after_its_review_was_settled_is_recorded_late(database_url: str) -> None:
    async with reviewed(database_url, {"R2": PLAIN}) as people:
        call = await people.ask("rex", "R2")
        async with people.svc.container.uow.reader() as uow:
            [queued] = await uow.reviews.queued(10)
        model = Held()
        asking = asyncio.create_task(worker(people, model).review(queued))
        await asyncio.wait_for(model.asked.wait(), 10)
        sweeper = ReviewerLoop(
            people.svc.container.uow,
            Held(),
            lambda _ws: ONE_A_MINUTE,
            clock=lambda: utcnow() + timedelta(minutes=7),
        )
        await sweeper.run_once()  # marks the claimed review interrupted, as after a stopped process
        model.release.set()
        await asking

        verdicts = [
            (r.details["verdict"], r.details["tokens"], r.details.get("late", False))
            for r in await people.audit(call)
            if r.action == "pending.reviewed"
        ]
        assert verdicts == [("interrupted", 0, False), ("unsure", 321, True)]
        async with people.svc.container.uow.reader() as uow:
            day = utcnow().replace(hour=0, minute=0, second=0, microsecond=0)
            _, tokens = await uow.reviews.spent(call.workspace, utcnow() - timedelta(minutes=1), day)
        assert tokens == 321
