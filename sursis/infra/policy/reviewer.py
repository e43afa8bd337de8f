"""The reviewer at work: asks a route's reviewer model about each queued call, on the worker.

The policy decision stays synchronous and cheap: it only names the reviewer. The call is suspended
and shown to people as any asked call; this loop then claims its queued review (`queued` →
`reviewing`, one conditional write: one process per review) and checks the workspace's budget in
the same step (the workspace's claims serialized: no two processes spend one remainder), asks
the model with a timeout, records the verdict (audit row and event) and, on `no`, approves or votes
through `PendingCallService.resolve_pending` as `reviewer:<model>`, the same compare-and-set a
person's decision takes. A process that stops between the claim and the verdict leaves the call to
people: the review is marked `interrupted` later and is not retried (a model answer is not free and
the people were asked all along).
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.usage import UsageLimits

from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.clock import Clock
from sursis.domain.errors import ServiceError, Stale
from sursis.domain.message_parts import logged_parts
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import PendingCall, Principal, StoredMessage
from sursis.domain.reviewer import (
    INSTRUCTIONS,
    Review,
    ReviewAnswer,
    ReviewEffect,
    ReviewerBudget,
    ReviewerModel,
    ReviewerSpec,
    ReviewOutcome,
    ReviewRequest,
    ReviewResult,
    parse_answer,
    review_prompt,
)
from sursis.domain.reviews.reviewer_steps import (
    ask_reviewer,
    record_late_verdict,
    record_verdict,
    reviewer_of,
    reviewer_principal,
)
from sursis.domain.states import Decision, PendingStatus
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.wakeup import Hearing

log = structlog.get_logger("sursis.reviewer")
MAX_TIMEOUT = timedelta(seconds=300)
"""The longest a review may take (`ReviewerSpec.timeout_seconds` is at most this): a review claimed
longer ago than this and a margin was left by a process that stopped."""
INTERRUPTED_AFTER = MAX_TIMEOUT + timedelta(seconds=60)
SWEEP_EVERY = timedelta(seconds=60)


class PydanticAiReviewer(ReviewerModel):
    """A reviewer model built from its name as the service builds an agent's (`build_model`:
    `scripted`, `openai:...`, any pydantic-ai name); one agent per model name, built once."""

    def __init__(self, models: Callable[[str], Model]) -> None:
        self._models = models
        self._agents: dict[str, Agent[None, str]] = {}

    async def review(self, spec: ReviewerSpec, request: ReviewRequest) -> ReviewAnswer:
        agent = self._agents.get(spec.model)
        if agent is None:
            agent = Agent(
                self._models(spec.model), instructions=INSTRUCTIONS, output_type=str, name="reviewer"
            )
            self._agents[spec.model] = agent
        prompt = review_prompt(spec, request, secrets.token_hex(8))
        result = await agent.run(prompt, usage_limits=UsageLimits(request_limit=1))
        verdict, reason = parse_answer(result.output)
        usage: Any = result.usage  # a property in newer pydantic-ai, a method before
        tokens = getattr(usage, "total_tokens", None)
        if tokens is None and callable(usage):
            tokens = usage().total_tokens
        return ReviewAnswer(verdict, reason, int(tokens or 0))


class PendingDecider(Protocol):
    """What a `no` acts through: the one resolution path people use (`PendingCallService`)."""

    async def resolve_pending(
        self, principal: Principal, correlation_id: uuid.UUID, resolution: Resolution
    ) -> PendingCall: ...


def conversation_text(messages: Sequence[StoredMessage], limit: int) -> tuple[str, ...]:
    """The latest `limit` text messages of a conversation (the user's prompts, the agent's text)."""
    found: list[str] = []
    for _, part in logged_parts(messages, ("user-prompt", "text")):
        content = part.get("content")
        if isinstance(content, str):
            who = "user" if part["part_kind"] == "user-prompt" else "agent"
            found.append(f"{who}: {content[:2000]}")
    return tuple(found[-limit:]) if limit else ()


class ReviewerLoop:
    """The worker's loop of reviews (see the module's docstring)."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        model: ReviewerModel,
        budget_for: Callable[[str], ReviewerBudget],
        *,
        clock: Clock,
        poll_seconds: float = 1.0,
        batch: int = 10,
        hearing: Hearing | None = None,
    ) -> None:
        self._uow = uow
        self._hearing = hearing
        self._model = model
        self._budget_for = budget_for
        self._clock = clock
        self._poll = poll_seconds
        self._batch = batch
        self._decider: PendingDecider | None = None
        self._swept_at: datetime | None = None

    def bind(self, decider: PendingDecider) -> None:
        self._decider = decider

    async def run(self, stopping: asyncio.Event) -> None:
        """A pass, then a wait for a pending call to be created or resolved (`wakeup.py`)."""
        hearing = self._hearing or Hearing(LocalRunNotifier(), self._poll)
        with hearing.wakeup(self._poll) as wakeup:
            while not stopping.is_set():
                try:
                    done = await self.run_once()
                except Exception:
                    log.exception("reviewer.pass_failed")
                    done = 0
                if done < self._batch:
                    await wakeup.wait(stopping)

    async def run_once(self) -> int:
        """Review the queued calls (at most one batch); how many were taken. A pass that finds
        nothing costs one read (and, once a minute, one more for reviews left by a stopped process)."""
        now = self._clock()
        if self._swept_at is None or now - self._swept_at >= SWEEP_EVERY:
            self._swept_at = now
            await self._mark_interrupted()
        async with self._uow.reader() as uow:
            queued = await uow.reviews.queued(self._batch)
        for review in queued:
            await self.review(review)
        return len(queued)

    async def _mark_interrupted(self) -> None:
        now = self._clock()
        async with self._uow.reader() as reader:
            stuck = await reader.reviews.stuck(now - INTERRUPTED_AFTER, self._batch)
        if not stuck:
            return
        async with self._uow() as uow:
            for review in stuck:
                call = await uow.pending.get(review.correlation_id)
                reason = "the review stopped before a verdict (the process ended): left to people"
                result = ReviewResult(ReviewOutcome.INTERRUPTED, reason)
                if call is not None and await record_verdict(uow, call, review, result, now):
                    await uow.reviews.set_effect(review.correlation_id, ReviewEffect.LEFT_TO_PEOPLE)
            await uow.commit()

    async def review(self, review: Review) -> ReviewOutcome | None:
        """One queued review, start to end; its outcome (None: another process has it)."""
        claimed = await self._claim(review)
        if isinstance(claimed, ReviewOutcome) or claimed is None:
            return claimed
        call, spec, request = claimed
        result = await ask_reviewer(self._model, spec, request)
        outcome, reason, _ = result
        now = self._clock()
        async with self._uow() as uow:
            settled = await record_verdict(uow, call, review, result, now)
            if settled and outcome is not ReviewOutcome.NO:
                await uow.reviews.set_effect(call.correlation_id, ReviewEffect.LEFT_TO_PEOPLE)
            if not settled:
                # Settled meanwhile (marked interrupted): the model was asked all the same, so its
                # answer and tokens are on record and counted, and nothing acts on it.
                await uow.reviews.add_tokens(call.correlation_id, result.tokens)
                await record_late_verdict(uow, call, review, result, now)
            await uow.commit()
        log.info(
            "reviewer.verdict",
            correlation_id=str(call.correlation_id),
            model=spec.model,
            verdict=outcome.value,
        )
        if settled and outcome is ReviewOutcome.NO:
            await self._act(call, spec, reason)
        return outcome

    async def _claim(
        self, review: Review
    ) -> tuple[PendingCall, ReviewerSpec, ReviewRequest] | ReviewOutcome | None:
        """The call and what the reviewer sees of it, the review claimed; or the outcome that settled
        it without a model (decided already, over budget); None: not this process's."""
        now = self._clock()
        async with self._uow() as uow:
            call = await uow.pending.get(review.correlation_id)
            spec = reviewer_of(call) if call is not None else None
            if call is None or spec is None:
                return None
            if call.status is not PendingStatus.AWAITING or call.expires_at <= now:
                why = "the call was decided before the reviewer read it"
                return await self._settle_early(uow, call, review, ReviewOutcome.SKIPPED, why, now)
            day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
            spent = await uow.reviews.claim_within_budget(
                call.correlation_id, call.workspace, now, now - timedelta(minutes=1), day_start
            )
            if spent is None:
                return None  # another process claimed it first: its verdict is the one recorded
            refused = self._budget_for(call.workspace).refuses(*spent)
            if refused is not None:
                why = f"over the reviewer budget: {refused}; left to people"
                return await self._settle_early(uow, call, review, ReviewOutcome.OVER_BUDGET, why, now)
            seen = (
                conversation_text(await uow.messages.read(call.conversation_id), spec.history)
                if spec.history
                else ()
            )
            await uow.commit()
        request = ReviewRequest(call.tool_name, call.agent, call.args, call.effect_description, seen)
        return call, spec, request

    async def _settle_early(
        self,
        uow: UnitOfWork,
        call: PendingCall,
        review: Review,
        outcome: ReviewOutcome,
        why: str,
        now: datetime,
    ) -> ReviewOutcome | None:
        if not await record_verdict(uow, call, review, ReviewResult(outcome, why), now):
            return None
        await uow.reviews.set_effect(call.correlation_id, ReviewEffect.LEFT_TO_PEOPLE)
        await uow.commit()
        log.info("reviewer.not_asked", correlation_id=str(call.correlation_id), outcome=outcome.value)
        return outcome

    async def _act(self, call: PendingCall, spec: ReviewerSpec, reason: str) -> None:
        """A `no`: approve (or vote) as `reviewer:<model>` with the arguments it read."""
        assert self._decider is not None, "ReviewerLoop.bind was not called"
        resolution = Resolution(Decision.APPROVE, reason=f"reviewer: {reason}", args_hash=call.args_hash)
        effect = ReviewEffect.LEFT_TO_PEOPLE
        try:
            resolved = await self._decider.resolve_pending(
                reviewer_principal(spec, call.workspace), call.correlation_id, resolution
            )
            effect = (
                ReviewEffect.APPROVED if resolved.status is PendingStatus.APPROVED else ReviewEffect.VOTED
            )
        except Stale:
            effect = ReviewEffect.STALE
        except ServiceError as exc:  # not an approver now (reassigned), arguments changed, ...
            log.warning("reviewer.not_counted", correlation_id=str(call.correlation_id), code=exc.code)
        async with self._uow() as uow:
            await uow.reviews.set_effect(call.correlation_id, effect)
            await uow.commit()
        log.info("reviewer.acted", correlation_id=str(call.correlation_id), effect=effect.value)
