"""Runs in SQL: queueing, claims and leases, progress, the end."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from abeyance.domain.records import (
    Run,
    RunError,
    Usage,
)
from abeyance.domain.states import RunStatus
from abeyance.infra.db import tables as t
from abeyance.infra.db.repositories.base import SqlRepository, rowcount
from abeyance.infra.db.rows import record_from_row, row_values
from abeyance.infra.telemetry import current_trace_context


def _run_from_row(row: Any) -> Run:
    m = row._mapping
    return record_from_row(
        Run,
        row,
        status=RunStatus(m["status"]),
        error=RunError(**m["error"]) if m["error"] else None,
        usage=Usage.from_json(m["usage"]),
    )


class SqlRunRepository(SqlRepository):
    async def add(self, run: Run) -> None:
        """Insert a run; without a trace context of its own it keeps the current one (the request's)."""
        await self._session.execute(
            t.runs.insert().values(
                row_values(
                    run,
                    t.runs,
                    error=dataclasses.asdict(run.error) if run.error else None,
                    usage=run.usage.to_json(),
                    trace_context=run.trace_context or current_trace_context(),
                )
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
        return rowcount(result) == 1

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
        return rowcount(result) == 1

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
            .values(usage=usage.to_json(), lease_expires_at=lease_until, claims=0, updated_at=now)
        )
        return rowcount(result) == 1

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
        return rowcount(result) == 1

    async def release_all(self, owner: str, now: datetime) -> int:
        result = await self._session.execute(
            t.runs.update()
            .where(t.runs.c.lease_owner == owner, t.runs.c.status == RunStatus.RUNNING.value)
            .values(status=RunStatus.QUEUED.value, lease_owner=None, lease_expires_at=None, updated_at=now)
        )
        return rowcount(result)

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
        unless_cancel_requested: bool = False,
    ) -> bool:
        extra: dict[str, Any] = {"usage": usage.to_json()} if usage is not None else {}
        if trace_context is not None:
            extra["trace_context"] = trace_context
        held = [
            t.runs.c.id == run_id,
            t.runs.c.lease_owner == owner,
            t.runs.c.status == RunStatus.RUNNING.value,
        ]
        if unless_cancel_requested:
            held.append(t.runs.c.cancel_requested.is_(False))
        result = await self._session.execute(
            t.runs.update()
            .where(*held)
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
        return rowcount(result) == 1
