"""Ports: what the service layer needs from storage and from the agent side."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self

from sursis.domain.approvers import ApproverRepository
from sursis.domain.ports._access_ports import ApiKeyRepository, AuthorizationRepository
from sursis.domain.ports._channel_ports import ChannelRepository
from sursis.domain.ports._conversation_ports import ConversationRepository as ConversationRepository
from sursis.domain.ports._conversation_ports import HeldConditionFailed as HeldConditionFailed
from sursis.domain.ports._conversation_ports import SeenConversation as SeenConversation
from sursis.domain.ports._customer_ports import WorkspaceRepository
from sursis.domain.ports._event_ports import EventRepository, OutboxRepository, WebhookRepository
from sursis.domain.ports._pending_ports import LeaseAhead as LeaseAhead
from sursis.domain.ports._pending_ports import PendingCallRepository as PendingCallRepository
from sursis.domain.ports._pending_ports import SeenDecision as SeenDecision
from sursis.domain.ports._reviewer_ports import ReviewRepository
from sursis.domain.records import (
    AuditEntry,
    AuditQuery,
    PendingCall,
    Run,
    RunError,
    StoredMessage,
    ToolCallMetadata,
    ToolCallRecord,
    Usage,
)
from sursis.domain.states import PendingStatus, RunStatus


class MessageRepository(Protocol):
    async def append(
        self,
        conversation_id: uuid.UUID,
        run_id: uuid.UUID | None,
        bodies: Sequence[str],
        now: datetime,
        channel: str | None = None,
        *,
        after_seq: int | None = None,
    ) -> int:
        """Append bodies after the last seq (`after_seq` when the caller knows it, as the holder of
        the run's lease does: a wrong one fails on the log's key), written through `channel`;
        returns the new last seq."""
        ...

    async def read(self, conversation_id: uuid.UUID, after_seq: int = 0) -> list[StoredMessage]: ...


class RunRepository(Protocol):
    async def add(self, run: Run) -> None: ...
    async def get(self, run_id: uuid.UUID) -> Run | None: ...
    async def transition(
        self,
        run_id: uuid.UUID,
        expected: Sequence[RunStatus],
        target: RunStatus,
        now: datetime,
        **fields: Any,
    ) -> bool:
        """Conditional write: only when the run is in one of `expected`."""
        ...

    async def keep_deps_state(self, run_id: uuid.UUID, state: Any) -> None:
        """Store (sealed) the JSON form of the run's deps state, for its next segment."""
        ...

    async def deps_state(self, run_id: uuid.UUID) -> Any:
        """The deps state stored with the run (None: none)."""
        ...

    async def resolve_one_awaiting(self, run_id: uuid.UUID, now: datetime) -> bool:
        """Count one awaiting call down; requeue the run when it was the last. True if requeued."""
        ...

    async def lease(
        self,
        run_id: uuid.UUID,
        owner: str,
        now: datetime,
        lease_until: datetime,
        *,
        log_after: int | None = None,
    ) -> Run | None:
        """A queued run leased to `owner` as a claim leases it (running, next segment, one more
        claim); None when it is not queued (another worker claimed it first). With `log_after` (the
        seq of its conversation the caller has read up to), the run's log after it may be read by
        the same statement, for this transaction's next `messages.read` of it (as `claim_next`)."""
        ...

    async def claim_next(
        self,
        owner: str,
        now: datetime,
        lease_until: datetime,
        *,
        log_from: Mapping[uuid.UUID, int] | None = None,
    ) -> Run | None:
        """Lease the oldest queued run to `owner`, counting the claim in `claims`. With `log_from`
        (a conversation's seq the caller has read up to), the claimed run's conversation log after
        that seq (0 for a conversation it does not name) may be read by the same statement, for
        this transaction's next `messages.read` of it."""
        ...

    async def renew_lease(self, run_id: uuid.UUID, owner: str, lease_until: datetime) -> bool: ...
    async def requeue_expired_leases(self, now: datetime) -> list[uuid.UUID]: ...
    async def next_lease_expiry(self) -> datetime | None:
        """When the first lease of a running run runs out (None: no run is running)."""
        ...

    async def record_progress(
        self, run_id: uuid.UUID, owner: str, usage: Usage, now: datetime, lease_until: datetime
    ) -> bool:
        """Store usage, renew the lease and reset `claims` (progress); False when the lease was lost."""
        ...

    async def finish(
        self,
        run_id: uuid.UUID,
        owner: str,
        status: RunStatus,
        now: datetime,
        *,
        usage: Usage | None = None,
        output: str | None = None,
        error: RunError | None = None,
        awaiting_count: int = 0,
        trace_context: dict[str, str] | None = None,
        unless_cancel_requested: bool = False,
    ) -> bool:
        """End the owner's segment (and reset `claims`); `trace_context`, when given, is what the next
        segment continues. With `unless_cancel_requested`, a run asked to cancel is left as it is
        (False), so the caller can end it as cancelled instead in the same transaction.

        An implementation may hold the update to the commit when it is the transaction's first
        statement (PostgreSQL: one statement for the whole state change): it answers True, and the
        commit writes nothing and raises if the condition no longer holds; the caller then asks
        again in a new transaction (the runner does)."""
        ...

    async def cancel_requested(self, run_id: uuid.UUID) -> bool:
        """Whether a cancel was requested; the run row stays locked until the transaction ends."""
        ...

    async def release(self, run_id: uuid.UUID, owner: str, now: datetime) -> bool: ...
    async def release_all(self, owner: str, now: datetime, keep: Sequence[uuid.UUID] = ()) -> int:
        """Give back every run `owner` holds, except those in `keep`."""
        ...

    async def count_by_status(self) -> dict[RunStatus, int]:
        """How many runs are queued, running or suspended right now."""
        ...


class ToolCallRepository(Protocol):
    async def record(self, record: ToolCallRecord) -> bool:
        """Insert unless a row for (conversation_id, tool_call_id) exists; True if inserted."""
        ...

    async def record_outcome(self, record: ToolCallRecord) -> None:
        """Insert unless a row for (conversation_id, tool_call_id) exists, when nobody reads which:
        the row may be written at the commit, with the transaction's other writes."""
        ...

    async def get(self, conversation_id: uuid.UUID, tool_call_id: str) -> ToolCallRecord | None: ...
    async def for_ids(
        self, conversation_id: uuid.UUID, tool_call_ids: Sequence[str]
    ) -> dict[str, ToolCallRecord]:
        """The stored outcomes among `tool_call_ids`, by id."""
        ...

    async def for_run(self, run_id: uuid.UUID) -> list[ToolCallRecord]: ...


class AuditRepository(Protocol):
    """Append-only: there is no update or delete, by design."""

    async def append(self, entry: AuditEntry, now: datetime) -> None: ...
    async def append_unless_newest(
        self, entry: AuditEntry, now: datetime, *, among: tuple[str, ...], naming: str, unless: str
    ) -> bool:
        """`append`, as the transaction's first statement held to the commit, if the newest row of
        the entry's conversation among the actions `among` whose details name the tool call
        `naming` is not `unless`: True, and the commit raises `HeldConditionFailed` (nothing
        written) if it is, or if the store cannot tell it there. False, nothing appended: the
        store cannot hold it (read with `search`, then `append`)."""
        ...

    async def flush(self) -> None:
        """Write the rows appended so far now rather than at commit."""
        ...

    async def search(self, workspace: str | None, query: AuditQuery) -> list[AuditEntry]:
        """Rows of `workspace` (None: every workspace) matching every filter of `query`, at most
        `query.limit` of them."""
        ...


class UnitOfWork(Protocol):
    """One transaction. Rolls back on exit unless `commit()` was called; repositories never commit."""

    @property
    def conversations(self) -> ConversationRepository: ...
    @property
    def messages(self) -> MessageRepository: ...
    @property
    def runs(self) -> RunRepository: ...
    @property
    def pending(self) -> PendingCallRepository: ...
    @property
    def tool_calls(self) -> ToolCallRepository: ...
    @property
    def audit(self) -> AuditRepository: ...
    @property
    def ops(self) -> OpsRepository: ...
    @property
    def events(self) -> EventRepository: ...
    @property
    def webhooks(self) -> WebhookRepository: ...
    @property
    def outbox(self) -> OutboxRepository: ...
    @property
    def customer(self) -> WorkspaceRepository: ...
    @property
    def api_keys(self) -> ApiKeyRepository: ...
    @property
    def authorizations(self) -> AuthorizationRepository: ...
    @property
    def channels(self) -> ChannelRepository: ...
    @property
    def approvers(self) -> ApproverRepository: ...
    @property
    def reviews(self) -> ReviewRepository: ...

    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...
    async def commit(self) -> None: ...


class UnitOfWorkFactory(Protocol):
    def __call__(self) -> UnitOfWork: ...
    def reader(self) -> UnitOfWork:
        """A unit of work for reads only, which never commits: it costs no transaction of its own
        where the database allows (each statement then sees what was committed before it, as in a
        READ COMMITTED transaction). For the hot reads (credentials, runs, pending calls)."""
        ...


class ServiceMetrics(Protocol):
    """Operational counters the use cases report; called after the change is committed."""

    def run_status(self, status: RunStatus) -> None:
        """A run entered `status`."""
        ...

    def pending_resolved(self, call: PendingCall, status: PendingStatus, at: datetime) -> None:
        """An awaiting call left `awaiting` (decided, expired or cancelled) at `at`."""
        ...

    def tool_call(self, metadata: ToolCallMetadata) -> None:
        """One tool call was executed."""
        ...


class NoMetrics:
    """`ServiceMetrics` that records nothing."""

    def run_status(self, status: RunStatus) -> None:
        return None

    def pending_resolved(self, call: PendingCall, status: PendingStatus, at: datetime) -> None:
        return None

    def tool_call(self, metadata: ToolCallMetadata) -> None:
        return None


class OpsRepository(Protocol):
    """The service's own outbox, dead letters and failure clusters (what the `ops` agent operates)."""

    async def list_dead_letters(
        self, workspace: str, status: str | None, limit: int
    ) -> list[dict[str, Any]]: ...
    async def get_dead_letter(self, workspace: str, event_id: str) -> dict[str, Any] | None: ...
    async def replay_dead_letter(
        self, workspace: str, event_id: str, reason: str, now: datetime
    ) -> dict[str, Any]: ...
    async def list_clusters(self, workspace: str, status: str | None) -> list[dict[str, Any]]: ...
    async def get_cluster(self, workspace: str, cluster_id: str) -> dict[str, Any] | None: ...
    async def triage_cluster(
        self, workspace: str, cluster_id: str, status: str, notes: str, now: datetime
    ) -> dict[str, Any]: ...
    async def add_dead_letter(self, row: dict[str, Any]) -> None: ...
    async def add_cluster(self, row: dict[str, Any]) -> None: ...


__all__ = [
    "AuditRepository",
    "LeaseAhead",
    "MessageRepository",
    "NoMetrics",
    "OpsRepository",
    "PendingCallRepository",
    "RunRepository",
    "SeenDecision",
    "ServiceMetrics",
    "ToolCallRepository",
    "UnitOfWork",
    "UnitOfWorkFactory",
]
