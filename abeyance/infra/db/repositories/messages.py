"""The conversation's message log in SQL."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from abeyance.domain.records import (
    StoredMessage,
)
from abeyance.infra.db import tables as t
from abeyance.infra.db.repositories.base import SqlRepository


class SqlMessageRepository(SqlRepository):
    async def append(
        self,
        conversation_id: uuid.UUID,
        run_id: uuid.UUID | None,
        bodies: Sequence[str],
        now: datetime,
        channel: str | None = None,
        *,
        after_seq: int | None = None,
    ) -> int:
        last = after_seq if after_seq is not None else await self.last_seq(conversation_id)
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
                    "channel": channel,
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
