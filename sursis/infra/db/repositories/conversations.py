"""Conversations in SQL."""

from __future__ import annotations

import uuid
from datetime import datetime

import sqlalchemy as sa

from sursis.domain.records import (
    Conversation,
)
from sursis.infra.db import tables as t
from sursis.infra.db.held import HeldUpdate, hold, holds
from sursis.infra.db.repositories.base import HeldSqlRepository
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

    async def claim_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> bool:
        params = {"b_conversation_id": conversation_id, "b_run_id": run_id, "b_now": now}
        return await self._count(_CLAIM_ACTIVE_RUN, params) == 1

    async def release_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> None:
        if holds(self._session):
            row = {"conversation_id": conversation_id, "run_id": run_id, "at": now}
            hold(self._session, _RELEASE_HELD, [row])  # written at commit, with the events
            return
        params = {"b_conversation_id": conversation_id, "b_run_id": run_id, "b_now": now}
        await self._session.execute(_RELEASE_ACTIVE_RUN, params)
