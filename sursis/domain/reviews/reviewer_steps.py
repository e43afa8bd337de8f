"""The steps of a call's review that write: queued with the suspension, the verdict recorded
(audit row and `pending.reviewed` event), and the identity under which a `no` approves or votes.

A verdict is recorded in a transaction of its own before its `no` is acted on; the approval then
goes through `PendingCallService.resolve_pending` as a person's does (one conditional write: a race
with a person has one winner and one `stale`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sursis.domain.access import Role
from sursis.domain.events.events import EventType, pending_created_data, publish
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, PendingCall, Principal
from sursis.domain.reviewer import (
    REVIEWER_PREFIX,
    Review,
    ReviewerActs,
    ReviewerModel,
    ReviewerSpec,
    ReviewOutcome,
    ReviewRequest,
    ReviewResult,
)
from sursis.domain.tools import PendingKind


def reviewer_of(call: PendingCall) -> ReviewerSpec | None:
    """The reviewer an asked call's route names, if any."""
    if call.kind is not PendingKind.APPROVAL or call.policy is None or call.policy.route is None:
        return None
    return call.policy.route.reviewer


async def queue_reviews(uow: UnitOfWork, calls: Sequence[PendingCall], now: datetime) -> None:
    """Queue a review for each call whose route names a reviewer, in the suspension's transaction
    (calls without one cost nothing: no statement)."""
    reviews = [
        Review(
            correlation_id=call.correlation_id,
            workspace=call.workspace,
            model=spec.model,
            question=spec.question,
            outcome=ReviewOutcome.QUEUED,
            created_at=now,
            policy_version=call.policy.policy_version if call.policy else None,
            rule=call.policy.rule if call.policy else None,
        )
        for call in calls
        if (spec := reviewer_of(call)) is not None
    ]
    if reviews:
        await uow.reviews.queue(reviews)


def left_to_people(call: PendingCall, outcome: ReviewOutcome) -> bool:
    """Whether people still decide the call after this outcome: anything but a `no` of a reviewer
    whose `no` approves (a voting reviewer's `no` is one vote: people cast the rest)."""
    spec = reviewer_of(call)
    return outcome is not ReviewOutcome.NO or spec is None or spec.acts is ReviewerActs.VOTE


def reviewer_principal(spec: ReviewerSpec, workspace: str) -> Principal:
    """Who a reviewer's `no` approves (or votes) as: `reviewer:<model>`, an operator of the call's
    workspace and of nothing else. No API key has this id, so no person can act as it."""
    return Principal(id=spec.actor, role=Role.OPERATOR, workspace=workspace, name=f"reviewer {spec.model}")


async def record_verdict(
    uow: UnitOfWork,
    call: PendingCall,
    review: Review,
    result: ReviewResult,
    now: datetime,
) -> bool:
    """Settle the review with its outcome: the `pending.reviewed` audit row (naming the model, the
    question and the policy version) and event, in the caller's transaction. False: settled already."""
    if not await uow.reviews.settle(call.correlation_id, result, now):
        return False
    outcome, reason, _ = result
    details = _reviewed(review, result)
    await uow.audit.append(
        AuditEntry.of_call("pending.reviewed", REVIEWER_PREFIX + review.model, call, details), now
    )
    await publish(
        uow,
        call.conversation_id,
        call.workspace,
        EventType.PENDING_REVIEWED,
        {
            **pending_created_data(call),
            "left_to_people": left_to_people(call, outcome),
            "model": review.model,
            "question": review.question,
            "verdict": outcome.value,
            "reason": reason,
            "policy_version": review.policy_version,
        },
        now,
    )
    return True


async def record_late_verdict(
    uow: UnitOfWork, call: PendingCall, review: Review, result: ReviewResult, now: datetime
) -> None:
    """The `pending.reviewed` row of a model answer that came after its review was settled: every
    model call is on record with its tokens; `late` says nothing acted on it."""
    details = {**_reviewed(review, result), "late": True}
    await uow.audit.append(
        AuditEntry.of_call("pending.reviewed", REVIEWER_PREFIX + review.model, call, details), now
    )


async def ask_reviewer(model: ReviewerModel, spec: ReviewerSpec, request: ReviewRequest) -> ReviewResult:
    """The model's verdict within the spec's timeout. An error or a timeout is an outcome of its own
    (the call is left to people); its reason names only the kind of failure, never the message (it
    may hold a URL or a key)."""
    try:
        async with asyncio.timeout(spec.timeout_seconds):
            answer = await model.review(spec, request)
    except TimeoutError:
        return ReviewResult(
            ReviewOutcome.TIMEOUT, f"no verdict within {spec.timeout_seconds:g} s: left to people"
        )
    except Exception as exc:  # any failure of a model leaves the call to people, and says so
        return ReviewResult(
            ReviewOutcome.ERROR, f"the reviewer failed ({type(exc).__name__}): left to people"
        )
    return ReviewResult(ReviewOutcome(answer.verdict.value), answer.reason, answer.tokens)


async def with_reviews(uow: UnitOfWork, calls: list[PendingCall]) -> list[PendingCall]:
    """`calls` with the review of each whose route names a reviewer (others cost nothing)."""
    ids = [c.correlation_id for c in calls if reviewer_of(c) is not None]
    if not ids:
        return calls
    found = await uow.reviews.reviews(ids)
    return [replace(c, review=found[c.correlation_id]) if c.correlation_id in found else c for c in calls]


def _reviewed(review: Review, result: ReviewResult) -> dict[str, Any]:
    """The details of a `pending.reviewed` audit row: the model, its question and verdict, the
    policy version and rule, and the tokens the model call used."""
    outcome, reason, tokens = result
    return {
        "model": review.model,
        "question": review.question,
        "verdict": outcome.value,
        "reason": reason,
        "policy_version": review.policy_version,
        "rule": review.rule,
        "tokens": tokens,
    }
