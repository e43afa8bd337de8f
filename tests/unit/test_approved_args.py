"""What an approved call is bound to, and when its arguments or its stored outcome differ."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied

from sursis.domain.audit.integrity import ARGS_MISMATCH, OUTCOME_MISMATCH
from sursis.domain.records import PendingCall, ToolCallMetadata, ToolCallRecord
from sursis.domain.sanitize import args_hash, pending_args_hash
from sursis.domain.states import PendingStatus
from sursis.domain.tools import Executor, PendingKind
from sursis.infra.agents.approved_args import APPROVED, approved_hash, binding, mismatch, mismatches
from sursis.infra.agents.resumed import deferred_results

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ASKED = {"order_id": "A1", "amount": 900}


def approved_row(args: dict[str, Any], **changes: Any) -> PendingCall:
    values: dict[str, Any] = {
        "correlation_id": uuid.uuid4(),
        "conversation_id": uuid.uuid4(),
        "run_id": uuid.uuid4(),
        "workspace": "default",
        "segment": 1,
        "tool_call_id": "call_1",
        "tool_name": "refund",
        "agent": "payments",
        "executor": Executor.SERVER,
        "kind": PendingKind.APPROVAL,
        "args": args,
        "args_summary": args,
        "args_hash": args_hash("refund", args),
        "effect_description": "",
        "status": PendingStatus.APPROVED,
        "created_at": NOW,
        "expires_at": NOW,
        "resolution": {"decision": "approve"},
    }
    values.update(changes)
    return PendingCall(**values)


def part(args: dict[str, Any] | str, name: str = "refund") -> ToolCallPart:
    return ToolCallPart(name, args, tool_call_id="call_1")


def test_the_call_as_asked_matches_whether_its_args_are_a_dict_or_json() -> None:
    row = approved_row(ASKED)
    for args in (ASKED, '{"amount": 900, "order_id": "A1"}'):
        assert mismatch(part(args), binding(row, part(args))) is None


def test_other_amount_other_tool_or_a_rewritten_args_hash_are_mismatches() -> None:
    row = approved_row(ASKED)
    forged = {**ASKED, "amount": 9_000_000}
    found = mismatch(part(forged), binding(row, part(forged)))
    assert found is not None and found.action == ARGS_MISMATCH
    assert (found.expected, found.actual) == (row.args_hash, args_hash("refund", forged))
    assert mismatch(part(ASKED, "deploy"), binding(row, part(ASKED))) is not None
    rewritten = approved_row(ASKED, args_hash=args_hash("refund", forged))
    found = mismatch(part(forged), binding(rewritten, part(forged)))
    assert found is not None and "do not hash" in found.reason


def test_edited_arguments_bind_to_the_edit() -> None:
    edited = {**ASKED, "amount": 500}
    row = approved_row(ASKED, resolution={"decision": "approve", "args": edited})
    bound = binding(row, part(ASKED))
    assert mismatch(part(edited), bound) is None
    assert mismatch(part(ASKED), bound) is not None
    results = DeferredToolResults(
        approvals={"call_1": ToolApproved(override_args=edited)}, metadata={"call_1": {APPROVED: bound}}
    )
    assert mismatches([part(ASKED)], results) == []


def test_what_the_service_showed_beside_the_arguments_is_left_out() -> None:
    shown = {**ASKED, "review": {"rule": "shown to the deciders"}}
    row = approved_row(shown)
    assert mismatch(part(ASKED), binding(row, part(ASKED), ("review",))) is None
    assert mismatch(part(ASKED), binding(row, part(ASKED))) is not None


def test_a_stored_outcome_is_replayed_only_for_the_approved_arguments() -> None:
    row = approved_row(ASKED)
    bound = binding(row, part(ASKED))
    results = DeferredToolResults(
        approvals={"call_1": ToolApproved()}, metadata={"call_1": {APPROVED: bound}}
    )
    md = ToolCallMetadata("refund", "payments", 1.0, True, None, None, NOW, NOW)

    def stored(hash_: str | None) -> dict[str, ToolCallRecord | None]:
        return {"call_1": ToolCallRecord(row.conversation_id, row.run_id, "call_1", md, {}, args_hash=hash_)}

    assert mismatches([part(ASKED)], results, stored(row.args_hash)) == []
    assert mismatches([part(ASKED)], results, stored(None)) == []  # recorded before the hash was
    [found] = mismatches([part(ASKED)], results, stored("0" * 64))
    assert found.action == OUTCOME_MISMATCH
    assert approved_hash({APPROVED: bound}) == row.args_hash


def test_denied_calls_and_calls_without_a_binding_are_not_checked() -> None:
    forged = part({**ASKED, "amount": 1})
    denied = DeferredToolResults(approvals={"call_1": ToolDenied("no")})
    assert mismatches([forged], denied) == []
    unbound = DeferredToolResults(approvals={"call_1": ToolApproved()})
    assert mismatches([forged], unbound) == []
    assert mismatches([forged], None) == []


VALIDATED = {"order_id": "A1", "amount": 900, "currency": "EUR"}


def test_validated_arguments_are_bound_with_the_models_and_checked_at_dispatch() -> None:
    row = approved_row(
        ASKED, validated_args=VALIDATED, args_hash=pending_args_hash("refund", ASKED, VALIDATED)
    )
    bound = binding(row, part(ASKED))
    assert mismatch(part(ASKED), bound) is None
    assert mismatch(part(ASKED), bound, VALIDATED) is None
    found = mismatch(part(ASKED), bound, {**VALIDATED, "currency": "USD"})
    assert found is not None and "validated ones approved" in found.reason


def test_a_pending_row_whose_validated_arguments_were_rewritten_is_broken() -> None:
    honest = pending_args_hash("refund", ASKED, VALIDATED)
    row = approved_row(ASKED, validated_args={**VALIDATED, "amount": 9_000_000}, args_hash=honest)
    found = mismatch(part(ASKED), binding(row, part(ASKED)), VALIDATED)
    assert found is not None and "do not hash" in found.reason


@pytest.mark.skipif(
    "answered_by" not in DeferredToolResults.__dataclass_fields__,
    reason="pydantic-ai before 2.68 has no answered_by",
)
def test_the_resume_tells_pydantic_ai_who_decided_each_call() -> None:
    approved = approved_row(ASKED, resolved_by="key-approver")
    answered = approved_row(
        {"question": "which?"},
        tool_call_id="call_2",
        kind=PendingKind.ELICITATION,
        status=PendingStatus.ANSWERED,
        resolved_by="key-answerer",
        resolution={"decision": "answer", "result": "this one"},
    )
    tail = [part(ASKED), ToolCallPart("ask", {"question": "which?"}, tool_call_id="call_2")]
    results = deferred_results(tail, [approved, answered], abandoned=False, raw=True)
    assert results is not None
    assert results.answered_by == {"call_1": "key-approver", "call_2": "key-answerer"}


@pytest.mark.skipif(
    "answered_by" not in DeferredToolResults.__dataclass_fields__,
    reason="pydantic-ai before 2.68 has no answered_by",
)
def test_a_quorum_call_tells_pydantic_ai_every_approver_whose_vote_counted() -> None:
    approved = approved_row(
        ASKED,
        resolved_by="key-second",
        resolution={"decision": "approve", "votes": [["key-first", "approve"], ["key-second", "approve"]]},
    )
    results = deferred_results([part(ASKED)], [approved], abandoned=False, raw=True)
    assert results is not None
    assert results.answered_by == {"call_1": "key-first, key-second"}
