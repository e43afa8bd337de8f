"""The pending calls' port: decisions, their expiry, and what a decision may read ahead of its
transaction (`SeenDecision`) or take with it (`LeaseAhead`). `sursis.domain.ports` exports them."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sursis.domain.records import PendingCall, ToolCallRecord
from sursis.domain.states import PendingStatus
from sursis.domain.tools import PendingKind


@dataclass(frozen=True, slots=True)
class LeaseAhead:
    """A lease the statement that re-queues a run may take on it at once (`PendingCallRepository.decide`):
    to `owner` until `until`, the conversation's log after `log_after` read with it."""

    owner: str
    until: datetime
    log_after: int


@dataclass(frozen=True, slots=True)
class SeenDecision:
    """A pending call as a reader saw it before a decision (`PendingCallRepository.seen_for_decision`),
    and, when its run awaited it alone, what the decision's one statement holds on and the resumed
    segment starts from (`ahead`: the store's, opaque here)."""

    call: PendingCall
    ahead: object = None


class PendingCallRepository(Protocol):
    async def add(self, call: PendingCall) -> None: ...
    async def get(self, correlation_id: uuid.UUID) -> PendingCall | None: ...
    async def search(
        self,
        *,
        workspace: str | None,
        status: PendingStatus | None,
        kind: PendingKind | None,
        tool_name: str | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[PendingCall]: ...
    async def for_run(self, run_id: uuid.UUID, status: PendingStatus | None = None) -> list[PendingCall]: ...
    async def by_tool_call_ids(self, conversation_id: uuid.UUID, ids: Sequence[str]) -> list[PendingCall]: ...
    async def with_outcomes(
        self, conversation_id: uuid.UUID, ids: Sequence[str]
    ) -> tuple[list[PendingCall], dict[str, ToolCallRecord]]:
        """`by_tool_call_ids` and the stored outcomes of those calls (`tool_calls.for_ids`), in one
        statement where the database allows it: what a resumed segment starts from."""
        ...

    async def transition(
        self,
        correlation_id: uuid.UUID,
        target: PendingStatus,
        now: datetime,
        *,
        resolved_by: str,
        reason: str | None,
        resolution: dict[str, Any] | None,
        before_expiry: bool = False,
    ) -> bool:
        """`UPDATE ... WHERE correlation_id = :id AND status = 'awaiting'`; False for the loser.

        `before_expiry` (a person's decision) adds `AND expires_at > now`: an overdue call can
        only expire, even before a sweeper has seen it.
        """
        ...

    async def decide(
        self,
        call: PendingCall,
        target: PendingStatus,
        now: datetime,
        *,
        resolved_by: str,
        reason: str | None,
        resolution: dict[str, Any] | None,
        lease: LeaseAhead | None = None,
        seen: SeenDecision | None = None,
    ) -> bool | None:
        """A person's decision: `transition(..., before_expiry=True)` and, when it wins,
        `runs.resolve_one_awaiting(call.run_id)`, in one statement where the database allows it.
        None for the loser; else whether the decision re-queued the run. With `lease`, a run it
        re-queues may be leased by the same statement, for this transaction's `runs.lease` of it.
        With `seen` too, read before the transaction with the run awaiting this call alone, the
        decision and the lease may be held to the commit, as the transaction's one statement that
        holds only while the run is still the one read: then True, and the commit raises
        `HeldConditionFailed` if it did not hold (nothing written)."""
        ...

    async def seen_for_decision(
        self, correlation_id: uuid.UUID, log_from: Mapping[uuid.UUID, int]
    ) -> SeenDecision | None:
        """The call, read outside a transaction, with what a decision that frees its run's last
        awaiting call needs (the run, its log after the position `log_from` names for its
        conversation, the calls it resumes with): None when not found, or where the store reads a
        decision in its own transaction."""
        ...

    async def overdue(self, now: datetime, limit: int) -> list[PendingCall]: ...
    async def next_expiry(self) -> datetime | None:
        """When the first awaiting call expires (None: none awaits)."""
        ...

    async def count_awaiting(self) -> dict[PendingKind, int]:
        """How many calls await a decision right now, by kind."""
        ...

    async def extend_client_calls(
        self, conversation_id: uuid.UUID, until: datetime, *, created_after: datetime
    ) -> int:
        """Move `expires_at` of awaiting `client_exec` calls created after `created_after` to `until`."""
        ...
