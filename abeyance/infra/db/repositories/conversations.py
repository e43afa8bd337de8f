"""Conversations in SQL."""

from __future__ import annotations

import uuid
from datetime import datetime

import sqlalchemy as sa

from abeyance.domain.records import (
    Conversation,
)
from abeyance.infra.db import tables as t
from abeyance.infra.db.repositories.base import SqlRepository, rowcount
from abeyance.infra.db.rows import row_values


class SqlConversationRepository(SqlRepository):
    async def add(self, conversation: Conversation) -> None:
        await self._session.execute(
            t.conversations.insert().values(row_values(conversation, t.conversations))
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
        return rowcount(result) == 1

    async def release_active_run(self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime) -> None:
        await self._session.execute(
            t.conversations.update()
            .where(t.conversations.c.id == conversation_id, t.conversations.c.active_run_id == run_id)
            .values(active_run_id=None, updated_at=now)
        )
