"""SQLAlchemy implementations of the storage ports. They never commit: the unit of work does."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from abeyance.domain.records import (
    AuditEntry,
    Conversation,
    PendingCall,
    Run,
    RunError,
    StoredMessage,
    ToolCallMetadata,
    ToolCallRecord,
    Usage,
)
from abeyance.domain.states import PendingStatus, RunStatus
from abeyance.domain.tools import Executor, PendingKind
from abeyance.infra.db import tables as t
from abeyance.infra.telemetry import current_trace_context, current_trace_id, span_event


class _Repository:
    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    @property
    def _postgres(self) -> bool:
        return self._session.get_bind().dialect.name == "postgresql"

    def _insert(self, table: sa.Table) -> Any:
        return postgresql.insert(table) if self._postgres else sqlite.insert(table)


class SqlConversationRepository(_Repository):
    async def add(self, conversation: Conversation) -> None:
        await self._session.execute(
            t.conversations.insert().values(
                id=conversation.id,
                workspace=conversation.workspace,
                agent=conversation.agent,
                status=conversation.status,
                active_run_id=conversation.active_run_id,
                created_at=conversation.created_at,
                updated_at=conversation.updated_at,
                created_by=conversation.created_by,
            )
        )

    async def get(self, conversation_id: uuid.UUID) -> Conversation | None:
        row = (
            await self._session.execute(
                sa.select(t.conversations).where(t.conversations.c.id == conversation_id)
            )
        ).first()
        return Conversation(**row._mapping) if row else None

    async def claim_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> bool:
        result = await self._session.execute(
            t.conversations.update()
            .where(t.conversations.c.id == conversation_id, t.conversations.c.active_run_id.is_(None))
            .values(active_run_id=run_id, updated_at=now)
        )
        return _rowcount(result) == 1

    async def release_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> None:
        await self._session.execute(
            t.conversations.update()
            .where(t.conversations.c.id == conversation_id, t.conversations.c.active_run_id == run_id)
            .values(active_run_id=None, updated_at=now)
        )


class SqlMessageRepository(_Repository):
    async def append(
        self, conversation_id: uuid.UUID, run_id: uuid.UUID | None, bodies: Sequence[str], now: datetime
    ) -> int:
        last = await self.last_seq(conversation_id)
        if not bodies:
            return last
        await self._session.execute(
            t.messages.insert(),
            [
                {
                    "conversation_id": conversation_id,
                    "seq": last + i,
                    "run_id": run_id,
                    "body": body,
                    "created_at": now,
                }
                for i, body in enumerate(bodies, start=1)
            ],
        )
        return last + len(bodies)

    async def last_seq(self, conversation_id: uuid.UUID) -> int:
        value = await self._session.scalar(
            sa.select(sa.func.max(t.messages.c.seq)).where(t.messages.c.conversation_id == conversation_id)
        )
        return int(value or 0)

    async def read(self, conversation_id: uuid.UUID, after_seq: int = 0) -> list[StoredMessage]:
        rows = await self._session.execute(
            sa.select(t.messages)
            .where(t.messages.c.conversation_id == conversation_id, t.messages.c.seq > after_seq)
            .order_by(t.messages.c.seq)
        )
        return [StoredMessage(**row._mapping) for row in rows]


def _run_from_row(row: Any) -> Run:
    m = row._mapping
    error = m["error"]
    return Run(
        id=m["id"],
        conversation_id=m["conversation_id"],
        workspace=m["workspace"],
        agent=m["agent"],
        status=RunStatus(m["status"]),
        input=m["input"],
        output=m["output"],
        error=RunError(**error) if error else None,
        segment=m["segment"],
        awaiting_count=m["awaiting_count"],
        usage=_usage_from_json(m["usage"]),
        cancel_requested=m["cancel_requested"],
        lease_owner=m["lease_owner"],
        lease_expires_at=m["lease_expires_at"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        finished_at=m["finished_at"],
        trace_context=m["trace_context"],
        claims=m["claims"],
    )


def _usage_json(usage: Usage) -> dict[str, Any]:
    # The cost is stored as a decimal string: an estimate, but summed without float drift.
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
        "cost": None if usage.cost is None else str(usage.cost),
    }


def _usage_from_json(value: dict[str, Any]) -> Usage:
    cost = value.get("cost")
    return Usage(
        requests=value.get("requests", 0),
        input_tokens=value.get("input_tokens", 0),
        output_tokens=value.get("output_tokens", 0),
        tool_calls=value.get("tool_calls", 0),
        cost=None if cost is None else Decimal(cost),
    )


class SqlRunRepository(_Repository):
    async def add(self, run: Run) -> None:
        """Insert a run; without a trace context of its own it keeps the current one (the request's)."""
        await self._session.execute(
            t.runs.insert().values(
                id=run.id,
                conversation_id=run.conversation_id,
                workspace=run.workspace,
                agent=run.agent,
                status=run.status.value,
                input=run.input,
                output=run.output,
                error=None,
                segment=run.segment,
                awaiting_count=run.awaiting_count,
                usage=_usage_json(run.usage),
                cancel_requested=run.cancel_requested,
                claims=run.claims,
                lease_owner=None,
                lease_expires_at=None,
                trace_context=run.trace_context or current_trace_context(),
                created_at=run.created_at,
                updated_at=run.updated_at,
                finished_at=None,
            )
        )

    async def get(self, run_id: uuid.UUID) -> Run | None:
        row = (await self._session.execute(sa.select(t.runs).where(t.runs.c.id == run_id))).first()
        return _run_from_row(row) if row else None

    async def transition(
        self,
        run_id: uuid.UUID,
        expected: Sequence[RunStatus],
        target: RunStatus,
        now: datetime,
        **fields: Any,
    ) -> bool:
        result = await self._session.execute(
            t.runs.update()
            .where(t.runs.c.id == run_id, t.runs.c.status.in_([s.value for s in expected]))
            .values(status=target.value, updated_at=now, **fields)
        )
        return _rowcount(result) == 1

    async def resolve_one_awaiting(self, run_id: uuid.UUID, now: datetime) -> bool:
        # One statement: the row lock (PostgreSQL) or the database lock (SQLite) serializes
        # concurrent resolvers, so exactly one of them sees the count reach zero.
        result = await self._session.execute(
            t.runs.update()
            .where(
                t.runs.c.id == run_id,
                t.runs.c.status == RunStatus.SUSPENDED.value,
                t.runs.c.awaiting_count > 0,
            )
            .values(
                awaiting_count=t.runs.c.awaiting_count - 1,
                status=sa.case(
                    (t.runs.c.awaiting_count == 1, RunStatus.QUEUED.value), else_=RunStatus.SUSPENDED.value
                ),
                updated_at=now,
            )
            .returning(t.runs.c.status)
        )
        row = result.first()
        return row is not None and row[0] == RunStatus.QUEUED.value

    async def claim_next(self, owner: str, now: datetime, lease_until: datetime) -> Run | None:
        candidate = (
            sa.select(t.runs.c.id)
            .where(t.runs.c.status == RunStatus.QUEUED.value)
            .order_by(t.runs.c.updated_at)
            .limit(1)
        )
        if self._postgres:
            candidate = candidate.with_for_update(skip_locked=True)
        result = await self._session.execute(
            t.runs.update()
            .where(t.runs.c.id == candidate.scalar_subquery(), t.runs.c.status == RunStatus.QUEUED.value)
            .values(
                status=RunStatus.RUNNING.value,
                lease_owner=owner,
                lease_expires_at=lease_until,
                segment=t.runs.c.segment + 1,
                claims=t.runs.c.claims + 1,
                updated_at=now,
            )
            .returning(*t.runs.c)
        )
        row = result.first()
        return _run_from_row(row) if row else None

    async def renew_lease(self, run_id: uuid.UUID, owner: str, lease_until: datetime) -> bool:
        result = await self._session.execute(
            t.runs.update()
            .where(
                t.runs.c.id == run_id,
                t.runs.c.lease_owner == owner,
                t.runs.c.status == RunStatus.RUNNING.value,
            )
            .values(lease_expires_at=lease_until)
        )
        return _rowcount(result) == 1

    async def requeue_expired_leases(self, now: datetime) -> list[uuid.UUID]:
        result = await self._session.execute(
            t.runs.update()
            .where(t.runs.c.status == RunStatus.RUNNING.value, t.runs.c.lease_expires_at < now)
            .values(status=RunStatus.QUEUED.value, lease_owner=None, lease_expires_at=None, updated_at=now)
            .returning(t.runs.c.id)
        )
        return [row[0] for row in result]

    async def record_progress(
        self, run_id: uuid.UUID, owner: str, usage: Usage, now: datetime, lease_until: datetime
    ) -> bool:
        result = await self._session.execute(
            t.runs.update()
            .where(
                t.runs.c.id == run_id,
                t.runs.c.lease_owner == owner,
                t.runs.c.status == RunStatus.RUNNING.value,
            )
            .values(usage=_usage_json(usage), lease_expires_at=lease_until, claims=0, updated_at=now)
        )
        return _rowcount(result) == 1

    async def release(self, run_id: uuid.UUID, owner: str, now: datetime) -> bool:
        """Give a running run back to the queue (graceful shutdown)."""
        result = await self._session.execute(
            t.runs.update()
            .where(
                t.runs.c.id == run_id,
                t.runs.c.lease_owner == owner,
                t.runs.c.status == RunStatus.RUNNING.value,
            )
            .values(status=RunStatus.QUEUED.value, lease_owner=None, lease_expires_at=None, updated_at=now)
        )
        return _rowcount(result) == 1

    async def release_all(self, owner: str, now: datetime) -> int:
        result = await self._session.execute(
            t.runs.update()
            .where(t.runs.c.lease_owner == owner, t.runs.c.status == RunStatus.RUNNING.value)
            .values(status=RunStatus.QUEUED.value, lease_owner=None, lease_expires_at=None, updated_at=now)
        )
        return _rowcount(result)

    async def cancel_requested(self, run_id: uuid.UUID) -> bool:
        # FOR UPDATE (PostgreSQL; SQLite's write lock already covers it): a cancel cannot commit
        # between this read and the run state this transaction writes next.
        return bool(
            await self._session.scalar(
                sa.select(t.runs.c.cancel_requested).where(t.runs.c.id == run_id).with_for_update()
            )
        )

    async def count_by_status(self) -> dict[RunStatus, int]:
        c = t.runs.c
        active = [RunStatus.QUEUED.value, RunStatus.RUNNING.value, RunStatus.SUSPENDED.value]
        rows = await self._session.execute(
            sa.select(c.status, sa.func.count()).where(c.status.in_(active)).group_by(c.status)
        )
        return {RunStatus(status): int(count) for status, count in rows}

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
    ) -> bool:
        extra: dict[str, Any] = {"usage": _usage_json(usage)} if usage is not None else {}
        if trace_context is not None:
            extra["trace_context"] = trace_context
        result = await self._session.execute(
            t.runs.update()
            .where(
                t.runs.c.id == run_id,
                t.runs.c.lease_owner == owner,
                t.runs.c.status == RunStatus.RUNNING.value,
            )
            .values(
                status=status.value,
                output=output,
                error={"code": error.code, "message": error.message} if error else None,
                awaiting_count=awaiting_count,
                lease_owner=None,
                lease_expires_at=None,
                claims=0,
                updated_at=now,
                finished_at=now if status.finished else None,
                **extra,
            )
        )
        return _rowcount(result) == 1


def _pending_from_row(row: Any) -> PendingCall:
    m = dict(row._mapping)
    m["executor"] = Executor(m["executor"])
    m["kind"] = PendingKind(m["kind"])
    m["status"] = PendingStatus(m["status"])
    return PendingCall(**m)


class SqlPendingCallRepository(_Repository):
    async def add(self, call: PendingCall) -> None:
        await self._session.execute(
            t.pending_calls.insert().values(
                correlation_id=call.correlation_id,
                conversation_id=call.conversation_id,
                run_id=call.run_id,
                workspace=call.workspace,
                segment=call.segment,
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                agent=call.agent,
                executor=call.executor.value,
                kind=call.kind.value,
                args=call.args,
                args_summary=call.args_summary,
                args_hash=call.args_hash,
                effect_description=call.effect_description,
                status=call.status.value,
                resolution=call.resolution,
                reason=call.reason,
                resolved_by=call.resolved_by,
                created_at=call.created_at,
                expires_at=call.expires_at,
                resolved_at=call.resolved_at,
            )
        )

    async def get(self, correlation_id: uuid.UUID) -> PendingCall | None:
        row = (
            await self._session.execute(
                sa.select(t.pending_calls).where(t.pending_calls.c.correlation_id == correlation_id)
            )
        ).first()
        return _pending_from_row(row) if row else None

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
        c = t.pending_calls.c
        query = sa.select(t.pending_calls)
        if workspace is not None:
            query = query.where(c.workspace == workspace)
        if status is not None:
            query = query.where(c.status == status.value)
        if kind is not None:
            query = query.where(c.kind == kind.value)
        if tool_name is not None:
            query = query.where(c.tool_name == tool_name)
        if after is not None:
            created, cid = after
            query = query.where(
                sa.or_(c.created_at < created, sa.and_(c.created_at == created, c.correlation_id < cid))
            )
        query = query.order_by(c.created_at.desc(), c.correlation_id.desc()).limit(limit)
        return [_pending_from_row(row) for row in await self._session.execute(query)]

    async def for_run(self, run_id: uuid.UUID, status: PendingStatus | None = None) -> list[PendingCall]:
        c = t.pending_calls.c
        query = sa.select(t.pending_calls).where(c.run_id == run_id)
        if status is not None:
            query = query.where(c.status == status.value)
        return [_pending_from_row(row) for row in await self._session.execute(query.order_by(c.created_at))]

    async def by_tool_call_ids(self, conversation_id: uuid.UUID, ids: Sequence[str]) -> list[PendingCall]:
        if not ids:
            return []
        c = t.pending_calls.c
        rows = await self._session.execute(
            sa.select(t.pending_calls)
            .where(c.conversation_id == conversation_id, c.tool_call_id.in_(list(ids)))
            .order_by(c.created_at)
        )
        return [_pending_from_row(row) for row in rows]

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
        c = t.pending_calls.c
        conditions = [c.correlation_id == correlation_id, c.status == PendingStatus.AWAITING.value]
        if before_expiry:
            conditions.append(c.expires_at > now)
        result = await self._session.execute(
            t.pending_calls.update()
            .where(*conditions)
            .values(
                status=target.value,
                resolved_by=resolved_by,
                reason=reason,
                resolution=resolution,
                resolved_at=now,
            )
        )
        return _rowcount(result) == 1

    async def overdue(self, now: datetime, limit: int) -> list[PendingCall]:
        c = t.pending_calls.c
        rows = await self._session.execute(
            sa.select(t.pending_calls)
            .where(c.status == PendingStatus.AWAITING.value, c.expires_at <= now)
            .order_by(c.expires_at)
            .limit(limit)
        )
        return [_pending_from_row(row) for row in rows]

    async def count_awaiting(self) -> dict[PendingKind, int]:
        c = t.pending_calls.c
        rows = await self._session.execute(
            sa.select(c.kind, sa.func.count())
            .where(c.status == PendingStatus.AWAITING.value)
            .group_by(c.kind)
        )
        return {PendingKind(kind): int(count) for kind, count in rows}

    async def extend_client_calls(
        self, conversation_id: uuid.UUID, until: datetime, *, created_after: datetime
    ) -> int:
        c = t.pending_calls.c
        result = await self._session.execute(
            t.pending_calls.update()
            .where(
                c.conversation_id == conversation_id,
                c.kind == PendingKind.CLIENT_EXEC.value,
                c.status == PendingStatus.AWAITING.value,
                c.expires_at < until,
                c.created_at >= created_after,
            )
            .values(expires_at=until)
        )
        return _rowcount(result)


def _tool_call_from_row(row: Any) -> ToolCallRecord:
    m = row._mapping
    return ToolCallRecord(
        conversation_id=m["conversation_id"],
        run_id=m["run_id"],
        tool_call_id=m["tool_call_id"],
        metadata=ToolCallMetadata(
            tool_name=m["tool_name"],
            agent_name=m["agent_name"],
            latency_ms=m["latency_ms"],
            ok=m["ok"],
            error_class=m["error_class"],
            trace_id=m["trace_id"],
            started_at=m["started_at"],
            ended_at=m["ended_at"],
        ),
        result=m["result"],
        error_code=m["error_code"],
    )


class SqlToolCallRepository(_Repository):
    async def record(self, record: ToolCallRecord) -> bool:
        md = record.metadata
        statement = (
            self._insert(t.tool_calls)
            .values(
                conversation_id=record.conversation_id,
                run_id=record.run_id,
                tool_call_id=record.tool_call_id,
                tool_name=md.tool_name,
                agent_name=md.agent_name,
                ok=md.ok,
                error_class=md.error_class,
                error_code=record.error_code,
                latency_ms=md.latency_ms,
                trace_id=md.trace_id,
                result=record.result,
                started_at=md.started_at,
                ended_at=md.ended_at,
            )
            .on_conflict_do_nothing(index_elements=["conversation_id", "tool_call_id"])
        )
        return _rowcount(await self._session.execute(statement)) == 1

    async def get(self, conversation_id: uuid.UUID, tool_call_id: str) -> ToolCallRecord | None:
        c = t.tool_calls.c
        row = (
            await self._session.execute(
                sa.select(t.tool_calls).where(
                    c.conversation_id == conversation_id, c.tool_call_id == tool_call_id
                )
            )
        ).first()
        return _tool_call_from_row(row) if row else None

    async def for_run(self, run_id: uuid.UUID) -> list[ToolCallRecord]:
        c = t.tool_calls.c
        rows = await self._session.execute(sa.select(t.tool_calls).where(c.run_id == run_id).order_by(c.id))
        return [_tool_call_from_row(row) for row in rows]


class SqlAuditRepository(_Repository):
    """Append-only: there is deliberately no update or delete here (a trigger refuses them too).

    Each row carries the trace it was written in, and is also added as an event to the current
    span, so a trace shows every transition it caused.
    """

    async def append(self, entry: AuditEntry, now: datetime) -> None:
        trace_id = entry.trace_id or current_trace_id()
        await self._session.execute(
            t.audit_log.insert().values(
                at=now,
                actor=entry.actor,
                action=entry.action,
                workspace=entry.workspace,
                conversation_id=entry.conversation_id,
                run_id=entry.run_id,
                correlation_id=entry.correlation_id,
                trace_id=trace_id,
                details=entry.details,
            )
        )
        span_event(
            entry.action,
            {
                "abeyance.actor": entry.actor,
                "abeyance.run_id": entry.run_id,
                "abeyance.correlation_id": entry.correlation_id,
                "abeyance.tool_name": entry.details.get("tool_name"),
                "abeyance.tool_call_id": entry.details.get("tool_call_id"),
            },
        )

    async def search(
        self,
        *,
        workspace: str | None,
        conversation_id: uuid.UUID | None,
        correlation_id: uuid.UUID | None,
        actions: Sequence[str] = (),
        since: datetime | None,
        after_id: int | None,
        limit: int,
        newest_first: bool = False,
    ) -> list[AuditEntry]:
        c = t.audit_log.c
        query = sa.select(t.audit_log)
        for column, value in (
            (c.workspace, workspace),
            (c.conversation_id, conversation_id),
            (c.correlation_id, correlation_id),
        ):
            if value is not None:
                query = query.where(column == value)
        if actions:
            query = query.where(c.action.in_(list(actions)))
        if since is not None:
            query = query.where(c.at >= since)
        if after_id is not None:
            query = query.where(c.id < after_id if newest_first else c.id > after_id)
        order = c.id.desc() if newest_first else c.id
        rows = await self._session.execute(query.order_by(order).limit(limit))
        return [AuditEntry(**row._mapping) for row in rows]


def _rowcount(result: Any) -> int:
    return int(result.rowcount)
