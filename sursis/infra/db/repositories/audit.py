"""The audit trail in SQL."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.encryption import Cipher
from sursis.domain.records import AuditEntry, AuditQuery
from sursis.infra.db import tables as t
from sursis.infra.db.held import Guard, hold_guard, may_guard
from sursis.infra.db.repositories.base import SqlRepository
from sursis.infra.db.rows import record_from_row, row_values
from sursis.infra.db.sealing import AUDIT_LOG
from sursis.infra.db.unit_connection import UnitConnection
from sursis.infra.telemetry import current_trace_id, span_event


class SqlAuditRepository(SqlRepository):
    """Append-only: there is deliberately no update or delete here (a trigger refuses them too).

    Each row carries the trace it was written in, and is also added as an event to the current
    span, so a trace shows every transition it caused. Rows are held and written together, in
    the order they were appended, when the transaction commits (`flush`).
    """

    def __init__(self, session: UnitConnection) -> None:
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

    async def append_unless_newest(
        self, entry: AuditEntry, now: datetime, *, among: tuple[str, ...], naming: str, unless: str
    ) -> bool:
        cipher = self._cipher
        if (
            entry.conversation_id is None
            or not may_guard(self._session)
            or cipher.active_key_id is not None
            or cipher.refuses_plaintext
        ):
            return False
        params: dict[str, Any] = {
            "g_conversation_id": entry.conversation_id,
            "g_workspace": entry.workspace,
            "g_naming": naming,
            "g_unless": unless,
        }
        params |= {f"g_among_{i}": action for i, action in enumerate(among)}
        sql, types = _unless_newest_guard(len(among))
        hold_guard(self._session, Guard(sql, params, types))
        await self.append(entry, now)
        return True

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


@functools.cache
def _unless_newest_guard(actions: int) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """PostgreSQL: `append_unless_newest`'s condition as a held guard (`held.Guard`), a row when it
    holds. The newest row of the conversation among the actions that names the call, or that is
    sealed (its details a JSON string, not an object: whether it names the call cannot be told in
    SQL), must be a plaintext row of another action than `g_unless`, or there must be none. Each
    of the two is one index lookup, newest first (`ix_audit_log_call_marks`,
    `ix_audit_log_sealed_rows`, migration 0039), whatever the conversation's length: a call with
    no mark yet reads no row."""
    among = ", ".join(f":g_among_{i}" for i in range(actions))
    candidates = (
        f"m.conversation_id = :g_conversation_id AND m.workspace = :g_workspace AND m.action IN ({among})"
    )
    sql = (
        "SELECT 1 AS ok WHERE NOT EXISTS (SELECT 1 FROM ("
        "(SELECT m.id, m.action, true AS plain FROM audit_log m "
        f"WHERE {candidates} AND m.details ? 'tool_call_id' "
        "AND m.details ->> 'tool_call_id' = CAST(:g_naming AS text) "
        "AND m.details -> 'tool_call_id' = to_jsonb(CAST(:g_naming AS text)) "
        "ORDER BY m.id DESC LIMIT 1) "
        "UNION ALL "
        "(SELECT m.id, m.action, false AS plain FROM audit_log m "
        f"WHERE {candidates} AND jsonb_typeof(m.details) <> 'object' "
        "ORDER BY m.id DESC LIMIT 1) "
        "ORDER BY id DESC LIMIT 1) newest "
        "WHERE NOT newest.plain OR newest.action = :g_unless)"
    )
    c = t.audit_log.c
    types: tuple[tuple[str, Any], ...] = (
        ("g_conversation_id", c.conversation_id.type),
        ("g_workspace", c.workspace.type),
        ("g_naming", sa.Text()),
        ("g_unless", c.action.type),
        *((f"g_among_{i}", c.action.type) for i in range(actions)),
    )
    return sql, types


def audit_entry(row: Any, cipher: Cipher) -> AuditEntry:
    """The record a stored audit row holds: the one place a row becomes plaintext content (for
    reading and for the hash chain alike, so re-encryption never changes a row's hash)."""
    return record_from_row(AuditEntry, AUDIT_LOG.open_row(cipher, row))
