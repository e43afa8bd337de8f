"""The SQL unit of work: one connection, one transaction, rolled back unless committed
(`unit_connection.UnitConnection`: SQLAlchemy Core, no ORM session)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Set
from types import TracebackType
from typing import Self

from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.domain.encryption import Cipher, UnsealedValue
from sursis.domain.notifications.delivery import deliver
from sursis.infra.db.access_repositories import SqlApiKeyRepository, SqlAuthorizationRepository
from sursis.infra.db.approval_request_repository import SqlApprovalRequestRepository
from sursis.infra.db.approver_repository import SqlApproverRepository
from sursis.infra.db.channel_repository import SqlChannelRepository
from sursis.infra.db.customer_repository import SqlWorkspaceRepository
from sursis.infra.db.delegation_repository import SqlDelegationRepository
from sursis.infra.db.engine import reader_options
from sursis.infra.db.event_repositories import SqlEventRepository, SqlWebhookRepository
from sursis.infra.db.findings import FindingLog, record_unsealed
from sursis.infra.db.held import begun, holds
from sursis.infra.db.ops_repository import SqlOpsRepository
from sursis.infra.db.outbox_repository import SqlOutboxRepository
from sursis.infra.db.people_repository import SqlPersonSessionRepository, SqlProvisioningRuleRepository
from sursis.infra.db.policy_repository import SqlPolicyRepository
from sursis.infra.db.repositories import (
    SqlAuditRepository,
    SqlConversationRepository,
    SqlMessageRepository,
    SqlPendingCallRepository,
    SqlRunRepository,
    SqlToolCallRepository,
)
from sursis.infra.db.repositories.audit_chain import SqlAuditChainRepository
from sursis.infra.db.retention_repository import SqlRetentionRepository
from sursis.infra.db.review_repository import SqlReviewRepository
from sursis.infra.db.sessions import pinned_sessions
from sursis.infra.db.unit_connection import UnitConnection, UnitConnections

REPOSITORIES = (
    "conversations",
    "messages",
    "runs",
    "pending",
    "tool_calls",
    "audit",
    "ops",
    "events",
    "webhooks",
    "outbox",
    "api_keys",
    "authorizations",
    "customer",
    "delegations",
    "channels",
    "audit_chain",
    "retention",
    "policies",
    "approvers",
    "reviews",
    "approval_requests",
    "provisioning",
    "person_sessions",
)
"""The unit of work's repositories, each made at its first use."""

EventsListener = Callable[[Set[uuid.UUID]], None]
"""Told, after a commit, which conversations got new events (in-process wake-ups)."""
PendingListener = Callable[[Set[str]], None]
"""Told, after a commit, which workspaces had pending calls created or resolved."""
RunsListener = Callable[[Set[uuid.UUID]], None]
"""Told, after a commit, which runs' changes the transaction notified other processes of."""


class SqlUnitOfWork:
    def __init__(
        self,
        sessions: UnitConnections,
        on_events: EventsListener | None = None,
        on_pending: PendingListener | None = None,
        on_runs: RunsListener | None = None,
        *,
        read_only: bool = False,
        engine: AsyncEngine | None = None,
        writers: UnitConnections | None = None,
        findings: FindingLog | None = None,
    ) -> None:
        """`engine`: the engine whose connections tell whether a transaction may be sent as one
        statement without `BEGIN` (`commit`); without it, never. `writers`: where an integrity
        finding met in this unit of work is written (default: `sessions`)."""
        self._sessions = sessions
        self._writers = writers or sessions
        self._findings = findings or FindingLog()
        self._on_events = on_events
        self._on_pending = on_pending
        self._on_runs = on_runs
        self._read_only = read_only
        self._committed = False
        self._engine = engine

    async def __aenter__(self) -> Self:
        self.session: UnitConnection = self._sessions()
        for name in REPOSITORIES:  # a unit of work entered again starts with repositories of its new session
            self.__dict__.pop(name, None)
        return self

    # Each repository is made at its first use in the unit of work: most units of work use two or
    # three of them (docs/performance-history.md, eighth pass).
    @functools.cached_property
    def conversations(self) -> SqlConversationRepository:
        return SqlConversationRepository(self.session)

    @functools.cached_property
    def messages(self) -> SqlMessageRepository:
        return SqlMessageRepository(self.session)

    @functools.cached_property
    def runs(self) -> SqlRunRepository:
        return SqlRunRepository(self.session)

    @functools.cached_property
    def pending(self) -> SqlPendingCallRepository:
        return SqlPendingCallRepository(self.session)

    @functools.cached_property
    def tool_calls(self) -> SqlToolCallRepository:
        return SqlToolCallRepository(self.session)

    @functools.cached_property
    def audit(self) -> SqlAuditRepository:
        return SqlAuditRepository(self.session)

    @functools.cached_property
    def ops(self) -> SqlOpsRepository:
        return SqlOpsRepository(self.session)

    @functools.cached_property
    def events(self) -> SqlEventRepository:
        return SqlEventRepository(self.session)

    @functools.cached_property
    def webhooks(self) -> SqlWebhookRepository:
        return SqlWebhookRepository(self.session)

    @functools.cached_property
    def outbox(self) -> SqlOutboxRepository:
        return SqlOutboxRepository(self.session)

    @functools.cached_property
    def api_keys(self) -> SqlApiKeyRepository:
        return SqlApiKeyRepository(self.session)

    @functools.cached_property
    def authorizations(self) -> SqlAuthorizationRepository:
        return SqlAuthorizationRepository(self.session)

    @functools.cached_property
    def customer(self) -> SqlWorkspaceRepository:
        return SqlWorkspaceRepository(self.session)

    @functools.cached_property
    def delegations(self) -> SqlDelegationRepository:
        return SqlDelegationRepository(self.session)

    @functools.cached_property
    def channels(self) -> SqlChannelRepository:
        return SqlChannelRepository(self.session)

    @functools.cached_property
    def audit_chain(self) -> SqlAuditChainRepository:
        return SqlAuditChainRepository(self.session)

    @functools.cached_property
    def retention(self) -> SqlRetentionRepository:
        return SqlRetentionRepository(self.session)

    @functools.cached_property
    def policies(self) -> SqlPolicyRepository:
        return SqlPolicyRepository(self.session)

    @functools.cached_property
    def approvers(self) -> SqlApproverRepository:
        return SqlApproverRepository(self.session)

    @functools.cached_property
    def reviews(self) -> SqlReviewRepository:
        return SqlReviewRepository(self.session)

    @functools.cached_property
    def approval_requests(self) -> SqlApprovalRequestRepository:
        return SqlApprovalRequestRepository(self.session)

    @functools.cached_property
    def provisioning(self) -> SqlProvisioningRuleRepository:
        return SqlProvisioningRuleRepository(self.session)

    @functools.cached_property
    def person_sessions(self) -> SqlPersonSessionRepository:
        return SqlPersonSessionRepository(self.session)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.session.close()  # rolls back what was not committed
        if isinstance(exc, UnsealedValue):
            await record_unsealed(self._writers, exc, self._findings)

    @property
    def committed(self) -> bool:
        return self._committed

    async def commit(self) -> None:
        """Write what is held, deliver the events that need it, commit. On PostgreSQL, a
        transaction that sent nothing before is its last statement alone: sent on a connection in
        autocommit, without `BEGIN` and `COMMIT` (a statement is atomic on its own), as long as
        the engine's connections are sessions of their own (behind a transaction pooler the
        statement keeps its transaction)."""
        if self._read_only:
            raise RuntimeError("a reader unit of work does not commit: use the factory's unit of work")
        alone = (
            holds(self.session)
            and not begun(self.session)
            and self._engine is not None
            and pinned_sessions(self._engine)
        )
        await self.events.flush(audit=self.audit.take_held(), alone=alone)
        while undelivered := self.events.take_undelivered():
            for event in undelivered:
                await deliver(self, event)
            await self.events.flush(audit=self.audit.take_held())
        await self.session.commit()
        self._committed = True
        if self.events.published:
            if self._on_events is not None:
                self._on_events(frozenset(self.events.published))
            self.events.published.clear()
        if self.events.pending_workspaces:
            if self._on_pending is not None:
                self._on_pending(frozenset(self.events.pending_workspaces))
            self.events.pending_workspaces.clear()
        if self.events.notified_runs:
            if self._on_runs is not None:
                self._on_runs(frozenset(self.events.notified_runs))
            self.events.notified_runs.clear()


class SqlUnitOfWorkFactory:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        on_events: EventsListener | None = None,
        on_pending: PendingListener | None = None,
        on_runs: RunsListener | None = None,
        cipher: Cipher | None = None,
    ) -> None:
        self.engine = engine
        self.on_events = on_events
        self.on_pending = on_pending
        self.on_runs = on_runs
        self.cipher = cipher
        self.findings = FindingLog()
        info = {"cipher": cipher} if cipher is not None else None
        self._sessions: UnitConnections = functools.partial(UnitConnection, engine, info)
        reader = engine.execution_options(**reader_options(engine))
        self._readers: UnitConnections = functools.partial(UnitConnection, reader, info)

    def __call__(self) -> SqlUnitOfWork:
        return SqlUnitOfWork(
            self._sessions,
            self.on_events,
            self.on_pending,
            self.on_runs,
            engine=self.engine,
            findings=self.findings,
        )

    def reader(self) -> SqlUnitOfWork:
        """Reads without a transaction: on PostgreSQL the connection is in autocommit (no BEGIN
        and ROLLBACK round trips; at READ COMMITTED, the service's level, each statement of a
        transaction sees only what was committed before it anyway); on SQLite a plain deferred
        `BEGIN`, a snapshot that does not take the write lock (`create_engine`). Behind a
        transaction pooler a PostgreSQL reader runs in a transaction (`sessions.py`)."""
        readers = self._readers if pinned_sessions(self.engine) else self._sessions
        return SqlUnitOfWork(readers, read_only=True, writers=self._sessions, findings=self.findings)
