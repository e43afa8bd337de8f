"""Pending calls in SQL."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from abeyance.domain.records import (
    PendingCall,
)
from abeyance.domain.states import PendingStatus
from abeyance.domain.tools import Executor, PendingKind
from abeyance.infra.db import tables as t
from abeyance.infra.db.repositories.base import SqlRepository, rowcount
from abeyance.infra.db.rows import row_values


def _pending_from_row(row: Any) -> PendingCall:
    m = dict(row._mapping)
    m["executor"] = Executor(m["executor"])
    m["kind"] = PendingKind(m["kind"])
    m["status"] = PendingStatus(m["status"])
    return PendingCall(**m)


class SqlPendingCallRepository(SqlRepository):
    async def add(self, call: PendingCall) -> None:
        await self._session.execute(t.pending_calls.insert().values(row_values(call, t.pending_calls)))

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
        return rowcount(result) == 1

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
        return rowcount(result)
