"""An in-memory unit of work for the use cases' tests: the ports of `sursis.domain.ports`, on dicts.

Like the SQL one it isolates: a unit of work reads what was committed until it first writes; its
first write waits for the store's one write lock (as a database lock does) and works on its own
copy from then on, which `commit()` publishes and leaving without it drops. Every call yields to
the event loop once, so use cases started together with `asyncio.gather` interleave as they
would against a database. The repositories of other contexts (ops, customer workspaces,
pre-approvals) are not kept here: the use cases under test never reach them, and a call fails.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from sursis.domain.notifications.delivery import DELIVERED_EVENT_TYPES, deliver
from sursis.domain.ports import (
    LeaseAhead,
    OpsRepository,
    SeenConversation,
    SeenDecision,
    UnitOfWork,
    UnitOfWorkFactory,
)
from sursis.domain.ports._access_ports import AuthorizationRepository
from sursis.domain.ports._customer_ports import WorkspaceRepository
from sursis.domain.records import (
    AuditEntry,
    AuditQuery,
    Conversation,
    JsonText,
    PendingCall,
    Run,
    RunError,
    StoredMessage,
    ToolCallRecord,
    Usage,
)
from sursis.domain.records.access_records import ApiKey
from sursis.domain.records.channel_records import ChannelBinding, DigestItem
from sursis.domain.records.event_records import OutboxItem, StoredEvent, Webhook
from sursis.domain.states import PendingStatus, RunStatus
from sursis.domain.tools import Executor, PendingKind


class NotInMemory(AssertionError):
    """A use-case test reached a repository these fakes do not keep: the SQL repositories behind
    it are tested on the real databases, so a test that needs it belongs there."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is not kept in memory; test it on the real databases")


@dataclass
class Tables:
    conversations: dict[uuid.UUID, Conversation] = field(default_factory=dict)
    messages: list[StoredMessage] = field(default_factory=list)
    runs: dict[uuid.UUID, Run] = field(default_factory=dict)
    deps_states: dict[uuid.UUID, Any] = field(default_factory=dict)
    pending: dict[uuid.UUID, PendingCall] = field(default_factory=dict)
    tool_calls: dict[tuple[uuid.UUID, str], ToolCallRecord] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)
    events: list[StoredEvent] = field(default_factory=list)
    webhooks: dict[uuid.UUID, Webhook] = field(default_factory=dict)
    outbox: dict[int, tuple[OutboxItem, str]] = field(default_factory=dict)
    api_keys: dict[uuid.UUID, ApiKey] = field(default_factory=dict)
    bindings: dict[uuid.UUID, ChannelBinding] = field(default_factory=dict)
    digest_items: list[DigestItem] = field(default_factory=list)


class FakeStore:
    """The committed state, its write lock, and the count of commits."""

    def __init__(self) -> None:
        self.tables = Tables()
        self.write_lock = asyncio.Lock()
        self.commits = 0

    def __call__(self) -> FakeUnitOfWork:
        return FakeUnitOfWork(self)

    def reader(self) -> FakeUnitOfWork:
        return FakeUnitOfWork(self)


class FakeUnitOfWork:
    def __init__(self, store: FakeStore) -> None:
        self._store = store
        self._own: Tables | None = None
        self.conversations = FakeConversations(self)
        self.messages = FakeMessages(self)
        self.runs = FakeRuns(self)
        self.pending = FakePending(self)
        self.tool_calls = FakeToolCalls(self)
        self.audit = FakeAudit(self)
        self.events = FakeEvents(self)
        self.webhooks = FakeWebhooks(self)
        self.outbox = FakeOutbox(self)
        self.api_keys = FakeApiKeys(self)
        self.channels = FakeChannels(self)

    @property
    def ops(self) -> OpsRepository:
        raise NotInMemory("the ops repository")

    @property
    def customer(self) -> WorkspaceRepository:
        raise NotInMemory("the customer workspace repository")

    @property
    def authorizations(self) -> AuthorizationRepository:
        raise NotInMemory("pre-approvals")

    async def read(self) -> Tables:
        await asyncio.sleep(0)
        return self._own if self._own is not None else self._store.tables

    async def write(self) -> Tables:
        """This unit of work's own copy, taken once it holds the write lock."""
        await asyncio.sleep(0)
        if self._own is None:
            await self._store.write_lock.acquire()
            self._own = copy.deepcopy(self._store.tables)
        return self._own

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._own is not None:
            self._own = None
            self._store.write_lock.release()

    async def commit(self) -> None:
        await self.events.flush()
        while undelivered := self.events.take_undelivered():
            for event in undelivered:
                await deliver(self, event)
            await self.events.flush()
        if self._own is not None:
            self._store.tables = self._own
            self._own = copy.deepcopy(self._own)
        self._store.commits += 1


class _Repository:
    def __init__(self, uow: FakeUnitOfWork) -> None:
        self._uow = uow


class FakeConversations(_Repository):
    async def add(self, conversation: Conversation) -> None:
        (await self._uow.write()).conversations[conversation.id] = conversation

    async def get(self, conversation_id: uuid.UUID) -> Conversation | None:
        return (await self._uow.read()).conversations.get(conversation_id)

    async def purged(self, conversation_id: uuid.UUID) -> str | None:
        return None

    async def forks(self, conversation_id: uuid.UUID) -> list[Conversation]:
        rows = (await self._uow.read()).conversations.values()
        return sorted((c for c in rows if c.forked_from_id == conversation_id), key=lambda c: c.created_at)

    async def claim_active_run(
        self,
        conversation_id: uuid.UUID,
        run_id: uuid.UUID,
        now: datetime,
        *,
        log_after: int | None = None,
        seen: SeenConversation | None = None,
    ) -> bool:
        rows = (await self._uow.write()).conversations
        found = rows.get(conversation_id)
        if found is None or found.active_run_id is not None:
            return False
        rows[conversation_id] = replace(found, active_run_id=run_id, updated_at=now)
        return True

    async def seen(self, conversation_id: uuid.UUID, log_after: int | None) -> SeenConversation | None:
        found = await self.get(conversation_id)
        return SeenConversation(found) if found is not None else None

    async def release_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> None:
        rows = (await self._uow.write()).conversations
        found = rows.get(conversation_id)
        if found is not None and found.active_run_id == run_id:
            rows[conversation_id] = replace(found, active_run_id=None, updated_at=now)


class FakeMessages(_Repository):
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
        rows = (await self._uow.write()).messages
        seq = max((m.seq for m in rows if m.conversation_id == conversation_id), default=0)
        assert after_seq is None or after_seq == seq, "the log's last seq is not what the caller knew"
        for body in bodies:
            seq += 1
            rows.append(StoredMessage(conversation_id, seq, run_id, body, now, channel))
        return seq

    async def read(self, conversation_id: uuid.UUID, after_seq: int = 0) -> list[StoredMessage]:
        rows = (await self._uow.read()).messages
        return [m for m in rows if m.conversation_id == conversation_id and m.seq > after_seq]


class FakeRuns(_Repository):
    async def add(self, run: Run) -> None:
        (await self._uow.write()).runs[run.id] = run

    async def get(self, run_id: uuid.UUID) -> Run | None:
        return (await self._uow.read()).runs.get(run_id)

    async def _update(self, run_id: uuid.UUID, when: Any, **fields: Any) -> Run | None:
        """Write `fields` on the run if `when(run)` holds: the conditional `UPDATE` of the SQL one."""
        rows = (await self._uow.write()).runs
        found = rows.get(run_id)
        if found is None or not when(found):
            return None
        rows[run_id] = replace(found, **fields)
        return rows[run_id]

    async def transition(
        self,
        run_id: uuid.UUID,
        expected: Sequence[RunStatus],
        target: RunStatus,
        now: datetime,
        **fields: Any,
    ) -> bool:
        changed = await self._update(
            run_id, lambda r: r.status in expected, status=target, updated_at=now, **fields
        )
        return changed is not None

    async def keep_deps_state(self, run_id: uuid.UUID, state: Any) -> None:
        (await self._uow.write()).deps_states[run_id] = state

    async def deps_state(self, run_id: uuid.UUID) -> Any:
        return (await self._uow.read()).deps_states.get(run_id)

    async def resolve_one_awaiting(self, run_id: uuid.UUID, now: datetime) -> bool:
        found = (await self._uow.write()).runs.get(run_id)
        if found is None or found.status is not RunStatus.SUSPENDED or found.awaiting_count <= 0:
            return False
        last = found.awaiting_count == 1
        await self._update(
            run_id,
            lambda r: True,
            awaiting_count=found.awaiting_count - 1,
            status=RunStatus.QUEUED if last else RunStatus.SUSPENDED,
            updated_at=now,
        )
        return last

    async def claim_next(
        self,
        owner: str,
        now: datetime,
        lease_until: datetime,
        *,
        log_from: Mapping[uuid.UUID, int] | None = None,
    ) -> Run | None:
        queued = [r for r in (await self._uow.write()).runs.values() if r.status is RunStatus.QUEUED]
        if not queued:
            return None
        oldest = min(queued, key=lambda r: r.updated_at)
        return await self._update(
            oldest.id,
            lambda r: r.status is RunStatus.QUEUED,
            status=RunStatus.RUNNING,
            lease_owner=owner,
            lease_expires_at=lease_until,
            segment=oldest.segment + 1,
            claims=oldest.claims + 1,
            updated_at=now,
        )

    async def lease(
        self,
        run_id: uuid.UUID,
        owner: str,
        now: datetime,
        lease_until: datetime,
        *,
        log_after: int | None = None,
    ) -> Run | None:
        found = (await self._uow.write()).runs.get(run_id)
        if found is None:
            return None
        return await self._update(
            run_id,
            lambda r: r.status is RunStatus.QUEUED,
            status=RunStatus.RUNNING,
            lease_owner=owner,
            lease_expires_at=lease_until,
            segment=found.segment + 1,
            claims=found.claims + 1,
            updated_at=now,
        )

    def _held(self, owner: str) -> Any:
        return lambda r: r.lease_owner == owner and r.status is RunStatus.RUNNING

    async def renew_lease(self, run_id: uuid.UUID, owner: str, lease_until: datetime) -> bool:
        return await self._update(run_id, self._held(owner), lease_expires_at=lease_until) is not None

    async def next_lease_expiry(self) -> datetime | None:
        rows = (await self._uow.read()).runs.values()
        leases = [r.lease_expires_at for r in rows if r.status is RunStatus.RUNNING]
        return min((lease for lease in leases if lease is not None), default=None)

    async def requeue_expired_leases(self, now: datetime) -> list[uuid.UUID]:
        rows = (await self._uow.write()).runs
        expired = [
            r.id
            for r in rows.values()
            if r.status is RunStatus.RUNNING and r.lease_expires_at is not None and r.lease_expires_at < now
        ]
        for run_id in expired:
            await self._requeue(run_id, lambda r: True, now)
        return expired

    async def _requeue(self, run_id: uuid.UUID, when: Any, now: datetime) -> bool:
        requeued = await self._update(
            run_id, when, status=RunStatus.QUEUED, lease_owner=None, lease_expires_at=None, updated_at=now
        )
        return requeued is not None

    async def record_progress(
        self, run_id: uuid.UUID, owner: str, usage: Usage, now: datetime, lease_until: datetime
    ) -> bool:
        changed = await self._update(
            run_id, self._held(owner), usage=usage, lease_expires_at=lease_until, claims=0, updated_at=now
        )
        return changed is not None

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
        if unless_cancel_requested:
            current = (await self._uow.read()).runs.get(run_id)
            if current is not None and current.cancel_requested:
                return False
        extra: dict[str, Any] = {"usage": usage} if usage is not None else {}
        if trace_context is not None:
            extra["trace_context"] = trace_context
        changed = await self._update(
            run_id,
            self._held(owner),
            status=status,
            output=output,
            output_json=isinstance(output, JsonText),
            error=error,
            awaiting_count=awaiting_count,
            lease_owner=None,
            lease_expires_at=None,
            claims=0,
            updated_at=now,
            finished_at=now if status.finished else None,
            **extra,
        )
        return changed is not None

    async def cancel_requested(self, run_id: uuid.UUID) -> bool:
        found = (await self._uow.write()).runs.get(run_id)
        return bool(found and found.cancel_requested)

    async def release(self, run_id: uuid.UUID, owner: str, now: datetime) -> bool:
        return await self._requeue(run_id, self._held(owner), now)

    async def release_all(self, owner: str, now: datetime, keep: Sequence[uuid.UUID] = ()) -> int:
        held = [
            r.id for r in (await self._uow.write()).runs.values() if self._held(owner)(r) and r.id not in keep
        ]
        return sum([await self.release(run_id, owner, now) for run_id in held])

    async def count_by_status(self) -> dict[RunStatus, int]:
        counts: dict[RunStatus, int] = {}
        for run in (await self._uow.read()).runs.values():
            if run.status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.SUSPENDED):
                counts[run.status] = counts.get(run.status, 0) + 1
        return counts


class FakePending(_Repository):
    async def add(self, call: PendingCall) -> None:
        (await self._uow.write()).pending[call.correlation_id] = call

    async def get(self, correlation_id: uuid.UUID) -> PendingCall | None:
        return (await self._uow.read()).pending.get(correlation_id)

    async def search(
        self,
        *,
        workspace: str | None,
        status: PendingStatus | None,
        kind: PendingKind | None,
        tool_name: str | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[PendingCall]:
        found = [
            c
            for c in (await self._uow.read()).pending.values()
            if (workspace is None or c.workspace == workspace)
            and (status is None or c.status is status)
            and (kind is None or c.kind is kind)
            and (tool_name is None or c.tool_name == tool_name)
            and (after is None or (c.created_at, c.correlation_id) < after)
        ]
        found.sort(key=lambda c: (c.created_at, c.correlation_id), reverse=True)
        return found[:limit]

    async def for_run(self, run_id: uuid.UUID, status: PendingStatus | None = None) -> list[PendingCall]:
        rows = (await self._uow.read()).pending.values()
        found = [c for c in rows if c.run_id == run_id and (status is None or c.status is status)]
        return sorted(found, key=lambda c: c.created_at)

    async def by_tool_call_ids(self, conversation_id: uuid.UUID, ids: Sequence[str]) -> list[PendingCall]:
        rows = (await self._uow.read()).pending.values()
        found = [c for c in rows if c.conversation_id == conversation_id and c.tool_call_id in ids]
        return sorted(found, key=lambda c: c.created_at)

    async def with_outcomes(
        self, conversation_id: uuid.UUID, ids: Sequence[str]
    ) -> tuple[list[PendingCall], dict[str, ToolCallRecord]]:
        calls = await self.by_tool_call_ids(conversation_id, ids)
        return calls, await self._uow.tool_calls.for_ids(conversation_id, ids)

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
        rows = (await self._uow.write()).pending
        found = rows.get(correlation_id)
        if found is None or found.status is not PendingStatus.AWAITING:
            return False
        if before_expiry and found.expires_at <= now:
            return False
        rows[correlation_id] = replace(
            found,
            status=target,
            resolved_at=now,
            resolved_by=resolved_by,
            reason=reason,
            resolution=resolution,
        )
        return True

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
        won = await self.transition(
            call.correlation_id,
            target,
            now,
            resolved_by=resolved_by,
            reason=reason,
            resolution=resolution,
            before_expiry=True,
        )
        return await self._uow.runs.resolve_one_awaiting(call.run_id, now) if won else None

    async def seen_for_decision(
        self, correlation_id: uuid.UUID, log_from: Mapping[uuid.UUID, int]
    ) -> SeenDecision | None:
        return None  # decided in a transaction of its own, as on SQLite

    async def overdue(self, now: datetime, limit: int) -> list[PendingCall]:
        rows = (await self._uow.read()).pending.values()
        found = [c for c in rows if c.status is PendingStatus.AWAITING and c.expires_at <= now]
        return sorted(found, key=lambda c: c.expires_at)[:limit]

    async def next_expiry(self) -> datetime | None:
        rows = (await self._uow.read()).pending.values()
        return min((c.expires_at for c in rows if c.status is PendingStatus.AWAITING), default=None)

    async def count_awaiting(self) -> dict[PendingKind, int]:
        counts: dict[PendingKind, int] = {}
        for call in (await self._uow.read()).pending.values():
            if call.status is PendingStatus.AWAITING:
                counts[call.kind] = counts.get(call.kind, 0) + 1
        return counts

    async def extend_client_calls(
        self, conversation_id: uuid.UUID, until: datetime, *, created_after: datetime
    ) -> int:
        rows = (await self._uow.write()).pending
        extended = [
            c.correlation_id
            for c in rows.values()
            if c.conversation_id == conversation_id
            and c.status is PendingStatus.AWAITING
            and c.executor is Executor.CLIENT
            and c.expires_at < until
            and c.created_at >= created_after
        ]
        for correlation_id in extended:
            rows[correlation_id] = replace(rows[correlation_id], expires_at=until)
        return len(extended)


class FakeToolCalls(_Repository):
    async def record(self, record: ToolCallRecord) -> bool:
        rows = (await self._uow.write()).tool_calls
        key = (record.conversation_id, record.tool_call_id)
        if key in rows:
            return False
        rows[key] = record
        return True

    async def record_outcome(self, record: ToolCallRecord) -> None:
        await self.record(record)

    async def get(self, conversation_id: uuid.UUID, tool_call_id: str) -> ToolCallRecord | None:
        return (await self._uow.read()).tool_calls.get((conversation_id, tool_call_id))

    async def for_ids(
        self, conversation_id: uuid.UUID, tool_call_ids: Sequence[str]
    ) -> dict[str, ToolCallRecord]:
        rows = (await self._uow.read()).tool_calls
        return {i: rows[(conversation_id, i)] for i in tool_call_ids if (conversation_id, i) in rows}

    async def for_run(self, run_id: uuid.UUID) -> list[ToolCallRecord]:
        return [r for r in (await self._uow.read()).tool_calls.values() if r.run_id == run_id]


class FakeAudit(_Repository):
    async def append(self, entry: AuditEntry, now: datetime) -> None:
        rows = (await self._uow.write()).audit
        rows.append(replace(entry, id=len(rows) + 1, at=now))

    async def append_unless_newest(
        self, entry: AuditEntry, now: datetime, *, among: tuple[str, ...], naming: str, unless: str
    ) -> bool:
        return False

    async def search(self, workspace: str | None, query: AuditQuery) -> list[AuditEntry]:
        q = query

        def wanted(e: AuditEntry) -> bool:
            row_id = e.id or 0
            return (
                (workspace is None or e.workspace == workspace)
                and (q.conversation_id is None or e.conversation_id == q.conversation_id)
                and (q.correlation_id is None or e.correlation_id == q.correlation_id)
                and (not q.actions or e.action in q.actions)
                and (q.since is None or (e.at is not None and e.at >= q.since))
                and (q.after_id is None or (row_id < q.after_id if q.newest_first else row_id > q.after_id))
            )

        found = [replace(e) for e in (await self._uow.read()).audit if wanted(e)]
        return (found[::-1] if q.newest_first else found)[: q.limit]


class FakeEvents(_Repository):
    PENDING = ("pending.created", "pending.resolved")

    def __init__(self, uow: FakeUnitOfWork) -> None:
        super().__init__(uow)
        self._held: list[tuple[uuid.UUID, str, str, dict[str, Any], datetime]] = []
        self._undelivered: list[StoredEvent] = []

    def add(
        self, conversation_id: uuid.UUID, workspace: str, event_type: str, data: dict[str, Any], now: datetime
    ) -> None:
        self._held.append((conversation_id, workspace, event_type, data, now))

    async def flush(self) -> None:
        held, self._held = self._held, []
        for row in held:
            event = await self._write(*row)
            if event.type in DELIVERED_EVENT_TYPES and await self._uow.webhooks.may_deliver(
                event.workspace, event.conversation_id
            ):
                self._undelivered.append(event)

    def handed(self, run_id: uuid.UUID) -> None:
        """No other process to wake here."""

    def take_undelivered(self) -> list[StoredEvent]:
        undelivered, self._undelivered = self._undelivered, []
        return undelivered

    async def _write(
        self, conversation_id: uuid.UUID, workspace: str, event_type: str, data: dict[str, Any], now: datetime
    ) -> StoredEvent:
        rows = (await self._uow.write()).events
        event = StoredEvent(len(rows) + 1, conversation_id, workspace, event_type, data, now)
        rows.append(event)
        return event

    async def after(self, conversation_id: uuid.UUID, after_id: int, limit: int) -> list[StoredEvent]:
        await self.flush()
        rows = (await self._uow.read()).events
        return [e for e in rows if e.conversation_id == conversation_id and e.id > after_id][:limit]

    async def pending_after(self, workspace: str | None, after_id: int, limit: int) -> list[StoredEvent]:
        await self.flush()
        rows = (await self._uow.read()).events
        return [e for e in rows if self._pending_of(e, workspace) and e.id > after_id][:limit]

    async def last_pending_id(self, workspace: str | None, created_before: datetime | None) -> int:
        await self.flush()
        rows = (await self._uow.read()).events
        ids = [
            e.id
            for e in rows
            if self._pending_of(e, workspace) and (created_before is None or e.created_at < created_before)
        ]
        return max(ids, default=0)

    def _pending_of(self, event: StoredEvent, workspace: str | None) -> bool:
        return event.type in self.PENDING and (workspace is None or event.workspace == workspace)


class FakeWebhooks(_Repository):
    async def add(self, webhook: Webhook) -> None:
        (await self._uow.write()).webhooks[webhook.id] = webhook

    async def get(self, webhook_id: uuid.UUID) -> Webhook | None:
        return (await self._uow.read()).webhooks.get(webhook_id)

    async def for_workspace(self, workspace: str | None) -> list[Webhook]:
        rows = (await self._uow.read()).webhooks.values()
        return [w for w in rows if workspace is None or w.workspace == workspace]

    async def delete(self, webhook_id: uuid.UUID) -> bool:
        return (await self._uow.write()).webhooks.pop(webhook_id, None) is not None

    async def subscribed(self, workspace: str, event_type: str) -> list[Webhook]:
        return [w for w in await self.for_workspace(workspace) if event_type in w.events]

    async def may_deliver(self, workspace: str, conversation_id: uuid.UUID) -> bool:
        state = await self._uow.read()
        return bool(await self.for_workspace(workspace)) or any(
            b.workspace == workspace and b.conversation_id in (conversation_id, None)
            for b in state.bindings.values()
        )


class FakeChannels(_Repository):
    """The bindings a conversation's events fan out to, and the digest items they leave; the Slack
    and digest bookkeeping lives in SQL only (tests/channels runs it on both databases)."""

    async def bindings_for(self, conversation_id: uuid.UUID, workspace: str) -> list[ChannelBinding]:
        rows = (await self._uow.read()).bindings.values()
        return [b for b in rows if b.workspace == workspace and b.conversation_id in (conversation_id, None)]

    async def add_binding(self, binding: ChannelBinding) -> None:
        (await self._uow.write()).bindings[binding.id] = binding

    async def add_digest_items(self, items: Sequence[DigestItem]) -> None:
        if items:
            (await self._uow.write()).digest_items.extend(items)

    def __getattr__(self, name: str) -> Any:
        raise NotInMemory(f"channels.{name}")


class FakeOutbox(_Repository):
    """Rows and their status; what a delivery attempt would do with them is the deliverer's."""

    async def enqueue(
        self,
        workspace: str,
        topic: str,
        payload: dict[str, Any],
        now: datetime,
        *,
        conversation_id: uuid.UUID | None = None,
    ) -> int:
        rows = (await self._uow.write()).outbox
        item = OutboxItem(len(rows) + 1, workspace, topic, payload, attempts=0, source_event_id=None)
        rows[item.id] = (item, "pending")
        return item.id

    async def claim_due(
        self, topic_prefix: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[OutboxItem]:
        rows = (await self._uow.write()).outbox
        due = [i for i, s in rows.values() if s == "pending" and i.topic.startswith(topic_prefix)][:limit]
        for item in due:
            rows[item.id] = (replace(item, attempts=item.attempts + 1), "pending")
        return [rows[item.id][0] for item in due]

    async def _mark(self, outbox_id: int, status: str) -> None:
        rows = (await self._uow.write()).outbox
        rows[outbox_id] = (rows[outbox_id][0], status)

    async def mark_delivered(self, outbox_id: int, now: datetime) -> None:
        await self._mark(outbox_id, "delivered")

    async def schedule_retry(self, outbox_id: int, error: str, retry_at: datetime, now: datetime) -> None:
        await self._mark(outbox_id, "pending")

    async def mark_dead(
        self, item: OutboxItem, error: str, cluster: tuple[str, str] | None, now: datetime
    ) -> str:
        await self._mark(item.id, "dead")
        return f"dead-{item.id}"

    async def discard(self, outbox_id: int, reason: str, now: datetime) -> None:
        await self._mark(outbox_id, "discarded")

    async def status(self, outbox_id: int) -> str | None:
        found = (await self._uow.read()).outbox.get(outbox_id)
        return found[1] if found else None


class FakeApiKeys(_Repository):
    async def add(self, key: ApiKey) -> None:
        (await self._uow.write()).api_keys[key.id] = key

    async def get(self, key_id: uuid.UUID) -> ApiKey | None:
        return (await self._uow.read()).api_keys.get(key_id)

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        rows = (await self._uow.read()).api_keys.values()
        return next((k for k in rows if k.key_hash == key_hash), None)

    async def names(self, key_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        rows = (await self._uow.read()).api_keys
        return {key_id: rows[key_id].name for key_id in key_ids if key_id in rows}

    async def search(self, *, include_revoked: bool) -> list[ApiKey]:
        rows = (await self._uow.read()).api_keys.values()
        return [k for k in rows if include_revoked or k.revoked_at is None]

    async def count(self) -> int:
        return len((await self._uow.read()).api_keys)

    async def revoke(self, key_id: uuid.UUID, now: datetime) -> bool:
        rows = (await self._uow.write()).api_keys
        found = rows.get(key_id)
        if found is None or found.revoked_at is not None:
            return False
        rows[key_id] = replace(found, revoked_at=now)
        return True

    async def link_person(self, key_id: uuid.UUID, person: str | None) -> None:
        rows = (await self._uow.write()).api_keys
        if key_id in rows:
            rows[key_id] = replace(rows[key_id], person=person)


def unit_of_work_factory(store: FakeStore) -> UnitOfWorkFactory:
    """The store as the use cases take it (and as mypy checks it against the ports)."""
    return store


def _conforms(uow: FakeUnitOfWork) -> UnitOfWork:
    return uow
