"""Integrity findings: an audit row of their own kind for a stored value that was refused.

A value refused on read (`UnsealedValue`: an unsealed value in an encrypted column) is never
served; the refusal is also written down, in the workspace the row belongs to, naming the table,
column and row. The transaction that met the value is rolled back (or fails the run), so the
finding is written by one of its own, or in the run's failing transaction by the worker.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
import structlog

from sursis.domain.clock import utcnow
from sursis.domain.encryption import UnsealedValue
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.audit import SqlAuditRepository
from sursis.infra.db.sealing import SEALED_TABLES
from sursis.infra.db.unit_connection import UnitConnection, UnitConnections

log = structlog.get_logger("sursis.integrity")

FALLBACK_WORKSPACE = "default"
"""The workspace of a finding whose row names none (a digest item, a legal hold)."""


async def _owner(session: UnitConnection, exc: UnsealedValue) -> tuple[str, uuid.UUID | None]:
    """The workspace (and conversation) of the row holding the refused value, read from its
    plaintext columns."""
    address = exc.address
    sealed = next((s for s in SEALED_TABLES if s.table.name == address.table), None)
    if sealed is None:
        return FALLBACK_WORKSPACE, None
    table: Any = sealed.table
    where = [sealed.table.c[name] == value for name, value in zip(sealed.row, address.row, strict=True)]
    own = sealed.table.c
    columns: list[Any] = [own[n] for n in ("workspace", "conversation_id") if n in own]
    if not columns and "correlation_id" in own:
        table = table.join(t.pending_calls, t.pending_calls.c.correlation_id == own.correlation_id)
        columns = [t.pending_calls.c.workspace, t.pending_calls.c.conversation_id]
    if not columns:
        return FALLBACK_WORKSPACE, None
    row = (await session.execute(sa.select(*columns).select_from(table).where(*where).limit(1))).first()
    found = dict(row._mapping) if row is not None else {}
    conversation_id = found.get("conversation_id")
    workspace = found.get("workspace")
    if workspace is None and conversation_id is not None:
        workspace = await session.scalar(
            sa.select(t.conversations.c.workspace).where(t.conversations.c.id == conversation_id)
        )
    return workspace or FALLBACK_WORKSPACE, conversation_id


class FindingLog:
    """The refusals already written down by this process: a value read again and again (a
    delivery retried every second) is one finding, not one per read."""

    def __init__(self, limit: int = 10_000) -> None:
        self._seen: set[str] = set()
        self._limit = limit

    def first_time(self, exc: UnsealedValue) -> bool:
        where = exc.address.describe()
        if where in self._seen:
            return False
        if len(self._seen) >= self._limit:
            self._seen.clear()
        self._seen.add(where)
        return True


async def record_unsealed(
    sessions: UnitConnections,
    exc: UnsealedValue,
    written: FindingLog,
    now: datetime | None = None,
) -> None:
    """Write the finding of `exc` in a transaction of its own, once per value and process. A
    failure to write it is logged: the refusal itself stands either way."""
    if exc.recorded:
        return
    exc.recorded = True
    if not written.first_time(exc):
        return
    log.error("integrity.unsealed_value", **exc.address.details())
    try:
        async with sessions() as session:
            workspace, conversation_id = await _owner(session, exc)
            audit = SqlAuditRepository(session)
            await audit.append(exc.finding(workspace, conversation_id), now or utcnow())
            await audit.flush()
            await session.commit()
    except sa.exc.SQLAlchemyError as failure:  # the refusal stands; the finding is best effort
        log.error("integrity.finding_not_written", error_class=type(failure).__name__)
