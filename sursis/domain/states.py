"""The pending-call and run state machines, as data."""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never

from sursis.domain.errors import InvalidDecision, InvalidTransition
from sursis.domain.tools import PendingKind


class PendingStatus(StrEnum):
    AWAITING = "awaiting"
    APPROVED = "approved"
    DENIED = "denied"
    REVISION_REQUESTED = "revision_requested"
    ANSWERED = "answered"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self is not PendingStatus.AWAITING


class Decision(StrEnum):
    APPROVE = "approve"
    DENY = "deny"
    REVISE = "revise"
    ANSWER = "answer"


def decide(kind: PendingKind, decision: Decision) -> PendingStatus:
    """The status a decision leads to, or `InvalidDecision` if it does not fit the kind."""
    match kind:
        case PendingKind.APPROVAL:
            allowed = {
                Decision.APPROVE: PendingStatus.APPROVED,
                Decision.DENY: PendingStatus.DENIED,
                Decision.REVISE: PendingStatus.REVISION_REQUESTED,
            }
        case PendingKind.ELICITATION | PendingKind.CLIENT_EXEC:
            allowed = {Decision.ANSWER: PendingStatus.ANSWERED, Decision.DENY: PendingStatus.DENIED}
        case _:
            assert_never(kind)
    if decision not in allowed:
        raise InvalidDecision(
            f"decision {decision.value!r} does not fit a pending call of kind {kind.value!r}",
            extra={"allowed": sorted(d.value for d in allowed)},
        )
    return allowed[decision]


def ensure_pending_transition(current: PendingStatus, target: PendingStatus) -> None:
    """Only `awaiting` may change, and never into `awaiting`."""
    if current is not PendingStatus.AWAITING or target is PendingStatus.AWAITING:
        raise InvalidTransition(f"pending call cannot go from {current.value} to {target.value}")


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def settled(self) -> bool:
        """Settled runs are what `?wait=` waits for."""
        return self in (RunStatus.SUSPENDED, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)

    @property
    def finished(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset(
        {RunStatus.SUSPENDED, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.QUEUED}
    ),
    RunStatus.SUSPENDED: frozenset({RunStatus.QUEUED, RunStatus.CANCELLED}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}


def ensure_run_transition(current: RunStatus, target: RunStatus) -> None:
    if target not in RUN_TRANSITIONS[current]:
        raise InvalidTransition(f"run cannot go from {current.value} to {target.value}")
