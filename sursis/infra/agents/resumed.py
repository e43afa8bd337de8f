"""Resuming a run: the calls its log leaves unanswered and what each decision tells the model.

Used by the runner's segments and by a delegated inner agent's run alike, so it sits with the agents
(which the runner imports) rather than in the runner.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pydantic_ai.exceptions import (
    ToolFailed,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied

from sursis.domain.approvals.pending_calls import TIMEOUT_DECISION
from sursis.domain.errors import Error, ToolPolicyError, ok_result
from sursis.domain.records import PendingCall
from sursis.domain.states import PendingStatus
from sursis.domain.tools import PendingKind
from sursis.infra.agents.approved_args import APPROVED, binding
from sursis.infra.agents.observed import (
    EDITED_ARGS,
    POLICY,
    REDISPATCH,
    REVIEW,
    failure_message,
)


def unanswered_tool_calls(history: Sequence[ModelMessage]) -> tuple[int | None, list[ToolCallPart]]:
    """The index of the last model response, and its tool calls that have no result in the log yet."""
    answered: set[str] = set()
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, ModelResponse):
            calls = [
                p for p in message.parts if isinstance(p, ToolCallPart) and p.tool_call_id not in answered
            ]
            return index, calls
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id:
                answered.add(part.tool_call_id)
    return None, []


def policy_denial(code: str, message: str) -> str:
    return failure_message(ToolPolicyError(message, code=code).to_result())


def denial_for(call: PendingCall) -> str:
    """What the model sees for a suspension that did not end in approval or an answer."""
    reason = (call.reason or "").strip()
    match call.status:
        case PendingStatus.DENIED if (call.resolution or {}).get("decision") == TIMEOUT_DECISION:
            waited = call.expires_at - call.created_at
            return policy_denial(
                "APPROVAL_TIMED_OUT",
                f"Nobody decided within {_human(waited)}, so the approval policy denied this call; "
                "no approver denied it. The action was not performed.",
            )
        case PendingStatus.DENIED:
            return policy_denial(
                "APPROVAL_DENIED", f"The operator denied this call. Reason: {reason or 'none given'}."
            )
        case PendingStatus.REVISION_REQUESTED:
            return policy_denial(
                "REVISION_REQUESTED",
                "The operator did not run this call and asks for a revised one. "
                f"Notes: {reason or 'none given'}. You may propose a new call with revised arguments.",
            )
        case PendingStatus.EXPIRED if call.kind is PendingKind.CLIENT_EXEC:
            waited = call.expires_at - call.created_at
            return policy_denial(
                "CLIENT_UNAVAILABLE",
                f"No client ran this tool within {_human(waited)} (nobody was connected to the "
                "conversation's event stream); it was not performed. Continue without it, or ask the "
                "user to reopen the app and try again.",
            )
        case PendingStatus.EXPIRED:
            waited = call.expires_at - call.created_at
            return policy_denial(
                "APPROVAL_EXPIRED", f"No decision within {_human(waited)}; the action was not performed."
            )
        case PendingStatus.CANCELLED:
            return policy_denial(
                "CANCELLED", "The run was cancelled before a decision; the action was not performed."
            )
        case _:
            raise ValueError(f"no denial for status {call.status}")


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60} min"
    return f"{seconds} s"


class NotReady(Error):
    """The run was queued while one of its calls still awaits a decision (should not happen)."""

    code = "not_ready"

    def __init__(self, message: str, awaiting: int) -> None:
        super().__init__(message)
        self.awaiting = awaiting


def deferred_results(
    tail: Sequence[ToolCallPart], rows: Sequence[PendingCall], abandoned: bool, *, raw: bool = False
) -> DeferredToolResults | None:
    """What the model is told of the calls `tail` left unanswered. An answer is given in the
    `{"ok": ...}` envelope of the built-in agents, or as it is (`raw`, an adopted agent)."""
    if not tail:
        return None
    latest: dict[str, PendingCall] = {}
    for earlier in sorted(rows, key=lambda r: r.created_at):
        latest[earlier.tool_call_id] = earlier
    results = DeferredToolResults()
    for part in tail:
        row = latest.get(part.tool_call_id)
        call_id = part.tool_call_id
        if row is None:
            if abandoned:
                results.approvals[call_id] = ToolDenied(
                    policy_denial("CANCELLED", "The run ended before this call; it was not performed.")
                )
            else:
                # Dispatched by a segment that died: run it again under the same id.
                results.approvals[call_id] = ToolApproved()
                results.metadata[call_id] = {REDISPATCH: True}
            continue
        if row.status is PendingStatus.AWAITING:
            awaiting = sum(1 for r in latest.values() if r.status is PendingStatus.AWAITING)
            raise NotReady(f"pending call {row.correlation_id} is still awaiting", awaiting)
        if row.resolved_by and hasattr(results, "answered_by"):  # pydantic-ai 2.68+
            # Who decided, for pydantic-ai's own events and telemetry.
            results.answered_by[call_id] = answered_by(row)
        if row.kind is PendingKind.APPROVAL:
            if row.status is PendingStatus.APPROVED:
                edited = (row.resolution or {}).get("args")
                results.approvals[call_id] = ToolApproved(override_args=edited)
                metadata: dict[str, Any] = {APPROVED: binding(row, part, (REVIEW,))}
                if row.policy is not None:
                    metadata[POLICY] = row.policy.to_json()
                if edited is not None:
                    metadata[EDITED_ARGS] = edited
                results.metadata[call_id] = metadata
            else:
                results.approvals[call_id] = ToolDenied(denial_for(row))
        elif row.status is PendingStatus.ANSWERED:
            answer = (row.resolution or {}).get("result")
            results.calls[call_id] = answer if raw else ok_result(answer)
        elif row.status is PendingStatus.DENIED:
            results.calls[call_id] = ToolFailed(
                policy_denial(
                    "ANSWER_DECLINED", f"No answer was given. Reason: {row.reason or 'none given'}."
                )
            )
        else:
            results.calls[call_id] = ToolFailed(denial_for(row))
    return results


def answered_by(row: PendingCall) -> str:
    """Who decided a call, as pydantic-ai's `answered_by` takes it (one string): on a routed call the
    approvers whose votes the sealed decision counted, in the order they voted, then the key whose
    decision settled it; otherwise that key."""
    votes = (row.resolution or {}).get("votes") or ()
    named = [str(vote[0]) for vote in votes if isinstance(vote, list | tuple) and vote]
    if row.resolved_by is not None:
        named.append(row.resolved_by)
    return ", ".join(dict.fromkeys(named))
