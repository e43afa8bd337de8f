"""Approval requests filed by agents Sursis does not host: what is stored beside the pending call
each one is, and the ports the use cases ask (`approval_requests.py`).

A filed request *is* a pending call (so the inbox, the CLI, the channels, the webhooks, the reviewer
and the resolve endpoint's compare-and-set serve it unchanged); this record adds what only an agent
outside needs: the idempotency key it files under, the digest its approval is bound to, and the
consume and outcome that close the audit trail.
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from sursis.domain.errors import Conflict, Forbidden, ValidationFailed
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import PendingCall, Principal
from sursis.domain.states import PendingStatus


class Outcome(StrEnum):
    """What the agent reports after it consumed an approval."""

    RAN = "ran"
    FAILED = "failed"
    NOT_RUN = "not_run"


ABANDONED = "abandoned"
"""The state of an approved request whose agent neither consumed it nor reported its outcome
before it expired: nobody can tell whether the action ran."""
CONSUMED = "consumed"


@dataclass(frozen=True, slots=True)
class Filing:
    """What an agent outside files: the call it wants to make and how long it may wait."""

    tool_name: str
    args: dict[str, Any]
    agent: str
    expires_in: timedelta
    conversation: str | None = None
    idempotency_key: str | None = None
    digest: str | None = None
    workspace: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """The outside half of a filed request (its pending call holds the call and the decision)."""

    correlation_id: uuid.UUID
    workspace: str
    filed_by: str
    digest: str
    created_at: datetime
    expires_at: datetime
    """Until when the request may be decided and its approval consumed."""
    idempotency_key: str | None = None
    conversation: str | None = None
    consumed_at: datetime | None = None
    consumed_by: str | None = None
    outcome: Outcome | None = None
    reported_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class FiledApproval:
    """A request as its agent and the API see it: the stored request and its pending call."""

    request: ApprovalRequest
    call: PendingCall
    created: bool = False
    """Filed by this request (False: an earlier filing under the same idempotency key)."""

    def state(self, now: datetime) -> str:
        """One word for where the request is: the pending call's status until it is approved, then
        `consumed`, the reported outcome, or `abandoned` when its expiry passed before them."""
        call, request = self.call, self.request
        if call.status is PendingStatus.AWAITING:
            return PendingStatus.EXPIRED.value if call.expires_at <= now else call.status.value
        if call.status is not PendingStatus.APPROVED:
            return call.status.value
        if request.outcome is not None:
            return request.outcome.value
        if request.expires_at <= now:
            return ABANDONED
        return CONSUMED if request.consumed_at is not None else call.status.value

    def approved_args(self) -> dict[str, Any]:
        """The arguments the deciders approved (an edit replaces the filed ones)."""
        edited = (self.call.resolution or {}).get("args")
        return edited if isinstance(edited, dict) else self.call.args


class ApprovalRequestRepository(Protocol):
    async def claim(self, request: ApprovalRequest) -> bool:
        """Store a new request; False (nothing stored) when its idempotency key is taken already."""
        ...

    async def get(self, correlation_id: uuid.UUID) -> ApprovalRequest | None: ...

    async def by_key(self, workspace: str, idempotency_key: str) -> ApprovalRequest | None: ...

    async def consume(self, correlation_id: uuid.UUID, digest: str, by: str, now: datetime) -> bool:
        """The one conditional write of a consume: True for exactly one caller presenting the
        request's digest before its expiry."""
        ...

    async def abandoned(self, workspace: str | None, now: datetime, limit: int) -> list[uuid.UUID]:
        """Approved requests past their expiry with no outcome (None: of every workspace), the most
        recently expired first."""
        ...

    async def report(self, correlation_id: uuid.UUID, outcome: Outcome, now: datetime) -> bool:
        """The outcome of a consumed request, once."""
        ...


class ApprovalUnitOfWork(UnitOfWork, Protocol):
    @property
    def approval_requests(self) -> ApprovalRequestRepository: ...


class ApprovalUnitOfWorkFactory(Protocol):
    def __call__(self) -> ApprovalUnitOfWork: ...

    def reader(self) -> ApprovalUnitOfWork: ...


class ExternalCallPolicy(Protocol):
    """The policy point, asked about a call an agent outside wants to make."""

    async def decide_external(self, workspace: str, filing: Filing, requester: Principal) -> PolicyDecision:
        """The point's decision (rules, ladder, defaults, pre-approvals); raising means it cannot tell."""
        ...


class PendingWatcher(Protocol):
    """Wakes a long-poll when a pending call of the workspace changes (best effort)."""

    def watch_pending(self, workspace: str | None) -> AbstractContextManager[asyncio.Event]: ...


class IdempotencyKeyReused(Conflict):
    code = "idempotency_key_reused"


class DigestMismatch(Conflict):
    code = "digest_mismatch"


class InvalidDigest(ValidationFailed):
    code = "invalid_digest"


class AlreadyConsumed(Conflict):
    code = "already_consumed"


class ApprovalExpired(Conflict):
    code = "approval_expired"


class NotApproved(Conflict):
    code = "not_approved"


class NotConsumed(Conflict):
    code = "not_consumed"


class AlreadyReported(Conflict):
    code = "already_reported"


class NotRequester(Forbidden):
    code = "not_requester"
