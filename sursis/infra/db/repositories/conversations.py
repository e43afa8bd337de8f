"""Conversations in SQL."""

from __future__ import annotations

import uuid
from datetime import datetime

import sqlalchemy as sa

from sursis.domain.records import (
    Conversation,
)
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.base import SqlRepository, rowcount
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


class SqlConversationRepository(SqlRepository):
    async def add(self, conversation: Conversation) -> None:
        await self._session.execute(_INSERT, row_values(conversation, t.conversations))

    async def get(self, conversation_id: uuid.UUID) -> Conversation | None:
        row = (await self._session.execute(_GET, {"conversation_id": conversation_id})).first()
        return Conversation(**row._mapping) if row else None

    async def purged(self, conversation_id: uuid.UUID) -> str | None:
        p = purged_conversations
        found = await self._session.scalar(sa.select(p.c.workspace).where(p.c.id == conversation_id))
        return None if found is None else str(found)

    async def claim_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> bool:
        params = {"b_conversation_id": conversation_id, "b_run_id": run_id, "b_now": now}
        return rowcount(await self._session.execute(_CLAIM_ACTIVE_RUN, params)) == 1

    async def release_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> None:
        params = {"b_conversation_id": conversation_id, "b_run_id": run_id, "b_now": now}
        await self._session.execute(_RELEASE_ACTIVE_RUN, params)
