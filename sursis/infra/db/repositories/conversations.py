"""Conversations in SQL."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.ports import SeenConversation
from sursis.domain.records import (
    Conversation,
)
from sursis.infra.db import tables as t
from sursis.infra.db.held import Guard, HeldUpdate, hold, hold_guard, holds, may_guard, read_ahead
from sursis.infra.db.repositories.base import HeldSqlRepository
from sursis.infra.db.repositories.run_statements import LOG_COLUMNS
from sursis.infra.db.retention_tables import purged_conversations
from sursis.infra.db.rows import row_values

_c = t.conversations.c
_INSERT = t.conversations.insert()
_GET = sa.select(t.conversations).where(_c.id == sa.bindparam("conversation_id"))
_CLAIM_ACTIVE_RUN = (
    t.conversations.update()
    .where(_c.id == sa.bindparam("b_conversation_id"), _c.active_run_id.is_(None))
    .values(active_run_id=sa.bindparam("b_run_id"), updated_at=sa.bindparam("b_now"))
)
_CLAIM_WITH_LOG = (
    sa.text(
        "WITH seen AS (SELECT xmin AS version FROM conversations WHERE id = :b_conversation_id), "
        "taken AS (UPDATE conversations SET active_run_id = :b_run_id, updated_at = :b_now "
        "WHERE id = :b_conversation_id AND active_run_id IS NULL AND xmin = (SELECT version FROM seen) "
        "RETURNING id) "
        "SELECT taken.id, " + ", ".join(f"m.{name} AS log_{name}" for name in LOG_COLUMNS) + " "
        "FROM taken LEFT JOIN messages m ON m.conversation_id = taken.id AND m.seq > :b_log_after "
        "ORDER BY m.seq"
    )
    .bindparams(
        sa.bindparam("b_conversation_id", type_=_c.id.type),
        sa.bindparam("b_run_id", type_=_c.active_run_id.type),
        sa.bindparam("b_now", type_=_c.updated_at.type),
        sa.bindparam("b_log_after", type_=sa.Integer()),
    )
    .columns(
        sa.column("id", _c.id.type),
        *(sa.column(f"log_{name}", t.messages.c[name].type) for name in LOG_COLUMNS),
    )
)
"""PostgreSQL: the claim, and the conversation's log after `b_log_after`, in one statement: one row
per message (one with no message when there is none). The log is read in the statement's snapshot,
so the claim holds only if the conversation's row is the version that snapshot saw (`xmin`): a run
that ended (its last messages written, the conversation freed) after the snapshot was taken changed
the row, so the update, which waits for that run's transaction and then re-reads the row, matches
nothing, and the claim is made again by `_CLAIM_ACTIVE_RUN` alone, the log read after it. Only the
run holding the conversation appends to its log, so a row unchanged since the snapshot means a log
unchanged since then."""
_VERSION = sa.literal_column("CAST(conversations.xmin AS text)", sa.Text()).label("version")


@functools.cache
def _seen_statement(with_log: bool) -> Any:
    """PostgreSQL: the conversation, its row's version (`xmin`), and with `with_log` its log after
    `log_after` read in the same statement (one row a message, one with no message when none)."""
    if not with_log:
        return sa.select(t.conversations, _VERSION).where(_c.id == sa.bindparam("conversation_id"))
    m = t.messages.c
    log = sa.and_(m.conversation_id == _c.id, m.seq > sa.bindparam("log_after", type_=sa.Integer()))
    return (
        sa.select(t.conversations, _VERSION, *(m[name].label(f"log_{name}") for name in LOG_COLUMNS))
        .select_from(t.conversations.outerjoin(t.messages, log))
        .where(_c.id == sa.bindparam("conversation_id"))
        .order_by(m.seq)
    )


_CLAIM_GUARD = (
    "UPDATE conversations SET active_run_id = :g_run_id, updated_at = :g_now "
    "WHERE id = :g_conversation_id AND active_run_id IS NULL AND CAST(xmin AS text) = :g_version "
    "RETURNING id"
)
"""PostgreSQL: the claim held to the commit (`held.Guard`), holding only if the conversation's row is
still the version a read of an earlier statement saw (`SqlConversationRepository.seen`): a run that
took and freed the conversation since, its log written, changed the row, and the claim writes
nothing. Only the run holding the conversation appends to its log, so a row unchanged since the
read means a log unchanged since then."""
_CLAIM_GUARD_TYPES = (
    ("g_run_id", _c.active_run_id.type),
    ("g_now", _c.updated_at.type),
    ("g_conversation_id", _c.id.type),
    ("g_version", sa.Text()),
)
_RELEASE_ACTIVE_RUN = (
    t.conversations.update()
    .where(_c.id == sa.bindparam("b_conversation_id"), _c.active_run_id == sa.bindparam("b_run_id"))
    .values(active_run_id=None, updated_at=sa.bindparam("b_now"))
)


_RELEASE_HELD = HeldUpdate(
    "released",
    "UPDATE conversations c SET active_run_id = NULL, updated_at = ("
    "SELECT r.at FROM jsonb_to_recordset(CAST(:{param} AS JSONB)) AS r(conversation_id uuid, at timestamptz) "
    "WHERE r.conversation_id = c.id LIMIT 1) "
    "WHERE c.id = ANY(ARRAY(SELECT r.conversation_id "
    "FROM jsonb_to_recordset(CAST(:{param} AS JSONB)) AS r(conversation_id uuid))) "
    "AND c.active_run_id = ANY(ARRAY(SELECT r.run_id "
    "FROM jsonb_to_recordset(CAST(:{param} AS JSONB)) AS r(run_id uuid)))",
)
"""`release_active_run`, held to the commit on PostgreSQL. The ids are compared with `= ANY` of
arrays, which the primary key's index serves, rather than joined to the rows (a join the planner
estimates at a hundred rows and hashes over the whole table). A run id belongs to one
conversation, so matching ids and run ids apart frees only the conversations named."""


class SqlConversationRepository(HeldSqlRepository):
    async def add(self, conversation: Conversation) -> None:
        await self._execute(_INSERT, row_values(conversation, t.conversations))

    async def get(self, conversation_id: uuid.UUID) -> Conversation | None:
        rows = await self._rows(_GET, {"conversation_id": conversation_id})
        return Conversation(**rows[0]._mapping) if rows else None

    async def forks(self, conversation_id: uuid.UUID) -> list[Conversation]:
        query = sa.select(t.conversations).where(_c.forked_from_id == conversation_id)
        rows = await self._execute(query.order_by(_c.created_at, _c.id))
        return [Conversation(**row._mapping) for row in rows]

    async def purged(self, conversation_id: uuid.UUID) -> str | None:
        p = purged_conversations
        found = await self._scalar(sa.select(p.c.workspace).where(p.c.id == conversation_id))
        return None if found is None else str(found)

    async def claim_active_run(
        self,
        conversation_id: uuid.UUID,
        run_id: uuid.UUID,
        now: datetime,
        *,
        log_after: int | None = None,
        seen: SeenConversation | None = None,
    ) -> bool:
        if seen is not None and seen.version is not None and may_guard(self._session):
            if isinstance(seen.log, tuple):
                read_ahead(self._session, conversation_id, *seen.log)
            guarded = {"g_run_id": run_id, "g_now": now, "g_conversation_id": conversation_id}
            guarded["g_version"] = seen.version
            hold_guard(self._session, Guard(_CLAIM_GUARD, guarded, _CLAIM_GUARD_TYPES))
            return True
        params: dict[str, Any] = {"b_conversation_id": conversation_id, "b_run_id": run_id, "b_now": now}
        if log_after is not None and self._postgres:
            rows = await self._rows(_CLAIM_WITH_LOG, {**params, "b_log_after": log_after})
            if rows:
                log = [
                    {
                        "conversation_id": conversation_id,
                        **{n: row._mapping[f"log_{n}"] for n in LOG_COLUMNS},
                    }
                    for row in rows
                    if row._mapping["log_seq"] is not None
                ]
                read_ahead(self._session, conversation_id, log_after, log)
                return True
        return await self._count(_CLAIM_ACTIVE_RUN, params) == 1

    async def seen(self, conversation_id: uuid.UUID, log_after: int | None) -> SeenConversation | None:
        if not self._postgres:
            found = await self.get(conversation_id)
            return SeenConversation(found) if found is not None else None
        params: dict[str, Any] = {"conversation_id": conversation_id}
        if log_after is not None:
            params["log_after"] = log_after
        rows = await self._rows(_seen_statement(log_after is not None), params)
        if not rows:
            return None
        first = rows[0]._mapping
        conversation = Conversation(**{c.name: first[c.name] for c in t.conversations.c})
        log = None
        if log_after is not None:
            kept = [
                {"conversation_id": conversation_id, **{n: row._mapping[f"log_{n}"] for n in LOG_COLUMNS}}
                for row in rows
                if row._mapping["log_seq"] is not None
            ]
            log = (log_after, kept)
        return SeenConversation(conversation, first["version"], log)

    async def release_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> None:
        if holds(self._session):
            row = {"conversation_id": conversation_id, "run_id": run_id, "at": now}
            hold(self._session, _RELEASE_HELD, [row])  # written at commit, with the events
            return
        params = {"b_conversation_id": conversation_id, "b_run_id": run_id, "b_now": now}
        await self._session.execute(_RELEASE_ACTIVE_RUN, params)
