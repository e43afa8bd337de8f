"""State machines, the tool result convention, and the one error-to-HTTP mapping."""

from __future__ import annotations

import pytest

from sursis.app.problems import RETRY_UNAVAILABLE_SECONDS, problem, status_for
from sursis.domain import errors as e
from sursis.domain.states import (
    Decision,
    PendingStatus,
    RunStatus,
    decide,
    ensure_pending_transition,
    ensure_run_transition,
)
from sursis.domain.tools import PendingKind


@pytest.mark.parametrize(
    ("kind", "decision", "expected"),
    [
        (PendingKind.APPROVAL, Decision.APPROVE, PendingStatus.APPROVED),
        (PendingKind.APPROVAL, Decision.DENY, PendingStatus.DENIED),
        (PendingKind.APPROVAL, Decision.REVISE, PendingStatus.REVISION_REQUESTED),
        (PendingKind.APPROVAL, Decision.ANSWER, None),
        (PendingKind.ELICITATION, Decision.ANSWER, PendingStatus.ANSWERED),
        (PendingKind.ELICITATION, Decision.DENY, PendingStatus.DENIED),
        (PendingKind.ELICITATION, Decision.APPROVE, None),
        (PendingKind.ELICITATION, Decision.REVISE, None),
        (PendingKind.CLIENT_EXEC, Decision.ANSWER, PendingStatus.ANSWERED),
        (PendingKind.CLIENT_EXEC, Decision.APPROVE, None),
    ],
)
def test_decisions_fit_kinds(kind: PendingKind, decision: Decision, expected: PendingStatus | None) -> None:
    if expected is None:
        with pytest.raises(e.InvalidDecision):
            decide(kind, decision)
    else:
        assert decide(kind, decision) is expected


def test_only_awaiting_may_change() -> None:
    for target in PendingStatus:
        if target is PendingStatus.AWAITING:
            with pytest.raises(e.InvalidTransition):
                ensure_pending_transition(PendingStatus.AWAITING, target)
        else:
            ensure_pending_transition(PendingStatus.AWAITING, target)
    for current in PendingStatus:
        if current is not PendingStatus.AWAITING:
            with pytest.raises(e.InvalidTransition):
                ensure_pending_transition(current, PendingStatus.APPROVED)


def test_run_transitions() -> None:
    ensure_run_transition(RunStatus.QUEUED, RunStatus.RUNNING)
    ensure_run_transition(RunStatus.RUNNING, RunStatus.SUSPENDED)
    ensure_run_transition(RunStatus.SUSPENDED, RunStatus.QUEUED)
    for finished in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
        assert finished.settled and finished.finished
        with pytest.raises(e.InvalidTransition):
            ensure_run_transition(finished, RunStatus.QUEUED)
    with pytest.raises(e.InvalidTransition):
        ensure_run_transition(RunStatus.QUEUED, RunStatus.COMPLETED)
    assert RunStatus.SUSPENDED.settled and not RunStatus.SUSPENDED.finished
    assert not RunStatus.RUNNING.settled


@pytest.mark.parametrize(
    ("error_class", "code"),
    [
        (e.ToolUserError, "INVALID_INPUT"),
        (e.ToolPolicyError, "POLICY_DENIED"),
        (e.ToolTransientError, "TRANSIENT"),
        (e.ToolTerminalError, "TERMINAL"),
    ],
)
def test_tool_errors_become_the_result_convention(error_class: type[e.ToolError], code: str) -> None:
    assert error_class("boom").to_result() == {
        "ok": False,
        "error": {"class": error_class.__name__, "code": code, "message": "boom"},
    }
    assert error_class("boom", code="CUSTOM").to_result()["error"]["code"] == "CUSTOM"


def test_unexpected_errors_are_sanitized_terminal_errors() -> None:
    result = e.unexpected_error_result()
    assert result["error"]["class"] == "ToolTerminalError"
    assert result["error"]["code"] == "UNEXPECTED"
    assert e.ok_result([1]) == {"ok": True, "result": [1]}


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (e.NotFound("x"), 404),
        (e.Stale("x"), 409),
        (e.RunActive("x"), 409),
        (e.ArgsChanged("x"), 409),
        (e.Conflict("x"), 409),
        (e.InvalidTransition("x"), 409),
        (e.InvalidDecision("x"), 422),
        (e.ValidationFailed("x"), 422),
        (e.Forbidden("x"), 403),
        (e.Unauthenticated("x"), 401),
    ],
)
def test_every_service_error_maps_to_one_status(error: e.ServiceError, status: int) -> None:
    assert status_for(error) == status


@pytest.mark.parametrize("code", ["database_unavailable", "unavailable"])
def test_every_503_says_when_to_come_back(code: str) -> None:
    answer = problem(503, code, "try again shortly")
    assert answer.headers["Retry-After"] == str(RETRY_UNAVAILABLE_SECONDS)
    told = problem(503, code, "try again shortly", {"retry_after": 7})
    assert told.headers["Retry-After"] == "7"
