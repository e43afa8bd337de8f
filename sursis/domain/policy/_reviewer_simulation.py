"""What a proposed policy's reviewers would have done with a past period's asks, before anyone turns
them on: each asked call whose route names a reviewer is put to the model (the rule's, or one named
for the simulation, e.g. `scripted`) exactly as the worker would put it, and counted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sursis.domain.policy.policy_ports import RecordedCall
from sursis.domain.reviewer import ReviewerModel, ReviewerSpec, ReviewOutcome, ReviewRequest, ReviewTally
from sursis.domain.reviews.reviewer_steps import ask_reviewer

MAX_REVIEWS = 500


async def simulate_reviews(
    model: ReviewerModel | None,
    asked: Sequence[tuple[RecordedCall, ReviewerSpec, str | None]],
    *,
    override: str | None,
    limit: int,
) -> ReviewTally:
    """The tally of `asked` (call, reviewer, rule), at most `limit` of them put to a model (the
    newest; the rest counted as `not_reviewed`). The reviewer sees the call and its arguments, not
    the conversation (a simulation does not read it)."""
    tally = ReviewTally()
    chosen = list(asked)[-limit:] if limit else []
    tally.not_reviewed = len(asked) - len(chosen)
    for call, spec, rule in chosen:
        used = replace(spec, model=override) if override else spec
        request = ReviewRequest(call.tool, call.agent, call.arguments or {})
        if model is None:
            outcome, reason = ReviewOutcome.ERROR, "no reviewer model is wired in this process"
        else:
            outcome, reason, _ = await ask_reviewer(model, used, request)
        tally.count(
            used,
            outcome,
            {
                "conversation_id": str(call.conversation_id),
                "tool_call_id": call.tool_call_id,
                "tool_name": call.tool,
                "at": call.at.isoformat(),
                "rule": rule,
                "reason": reason,
            },
        )
    return tally
