"""The audit trail in SQL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from sursis.domain.encryption import Cipher
from sursis.domain.records import AuditEntry, AuditQuery
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.base import SqlRepository
from sursis.infra.db.rows import record_from_row, row_values
from sursis.infra.db.sealing import AUDIT_LOG
from sursis.infra.telemetry import current_trace_id, span_event


class SqlAuditRepository(SqlRepository):
    """Append-only: there is deliberately no update or delete here (a trigger refuses them too).

    Each row carries the trace it was written in, and is also added as an event to the current
    span, so a trace shows every transition it caused. Rows are held and written together, in
    the order they were appended, when the transaction commits (`flush`).
    """

    def __init__(self, session: AsyncSession) -> None:
        super().__init__(session)
        self._held: list[dict[str, Any]] = []

    async def append(self, entry: AuditEntry, now: datetime) -> None:
        trace_id = entry.trace_id or current_trace_id()
        self._held.append(row_values(entry, t.audit_log, omit=("id",), at=now, trace_id=trace_id))
        span_event(
            entry.action,
            {
                "sursis.actor": entry.actor,
                "sursis.run_id": entry.run_id,
                "sursis.correlation_id": entry.correlation_id,
                "sursis.tool_name": entry.details.get("tool_name"),
                "sursis.tool_call_id": entry.details.get("tool_call_id"),
            },
        )

    def take_held(self) -> list[dict[str, Any]]:
        """The held rows, sealed, for a writer that sends them with other rows (the events')."""
        held, self._held = self._held, []
        return [AUDIT_LOG.seal(self._cipher, row) for row in held]

    async def flush(self) -> None:
        if self._held:
            await self._session.execute(t.audit_log.insert(), self.take_held())

    async def search(self, workspace: str | None, query: AuditQuery) -> list[AuditEntry]:
        await self.flush()
        c = t.audit_log.c
        select = sa.select(t.audit_log)
        for column, value in (
            (c.workspace, workspace),
            (c.conversation_id, query.conversation_id),
            (c.correlation_id, query.correlation_id),
        ):
            if value is not None:
                select = select.where(column == value)
        if query.actions:
            select = select.where(c.action.in_(list(query.actions)))
        if query.since is not None:
            select = select.where(c.at >= query.since)
        if query.after_id is not None:
            newest_first = query.newest_first
            select = select.where(c.id < query.after_id if newest_first else c.id > query.after_id)
        order = c.id.desc() if query.newest_first else c.id
        rows = await self._session.execute(select.order_by(order).limit(query.limit))
        return [audit_entry(row, self._cipher) for row in rows]


def audit_entry(row: Any, cipher: Cipher) -> AuditEntry:
    """The record a stored audit row holds: the one place a row becomes plaintext content (for
    reading and for the hash chain alike, so re-encryption never changes a row's hash)."""
    return record_from_row(AuditEntry, AUDIT_LOG.open_row(cipher, row))
