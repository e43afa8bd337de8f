"""The conversation's message log in SQL."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from sursis.domain.records import (
    StoredMessage,
)
from sursis.infra.db import tables as t
from sursis.infra.db.held import flush_held, hold, holds, take_read_ahead
from sursis.infra.db.repositories.base import SqlRepository
from sursis.infra.db.sealing import MESSAGES, OpenedRow

_c = t.messages.c
_INSERT = t.messages.insert()
_LAST_SEQ = sa.select(sa.func.max(_c.seq)).where(_c.conversation_id == sa.bindparam("conversation_id"))
_READ = (
    sa.select(t.messages)
    .where(_c.conversation_id == sa.bindparam("conversation_id"), _c.seq > sa.bindparam("after_seq"))
    .order_by(_c.seq)
)


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
        rows = [
            MESSAGES.seal(
                self._cipher,
                {
                    "conversation_id": conversation_id,
                    "seq": last + i,
                    "run_id": run_id,
                    "body": body,
                    "created_at": now,
                    "channel": channel,
                },
            )
            for i, body in enumerate(bodies, start=1)
        ]
        take_read_ahead(self._session, conversation_id, last)  # no longer the whole tail
        if holds(self._session):
            hold(self._session, t.messages, rows)  # written at commit, with the events
        else:
            await self._session.execute(_INSERT, rows)
        return last + len(bodies)

    async def last_seq(self, conversation_id: uuid.UUID) -> int:
        await flush_held(self._session)
        value = await self._session.scalar(_LAST_SEQ, {"conversation_id": conversation_id})
        return int(value or 0)

    async def read(self, conversation_id: uuid.UUID, after_seq: int = 0) -> list[StoredMessage]:
        # A log read ahead is the whole tail (appending to it drops it): nothing held to write first.
        kept = take_read_ahead(self._session, conversation_id, after_seq)
        if kept is not None:
            return [StoredMessage(**MESSAGES.open(self._cipher, OpenedRow(row))) for row in kept]
        await flush_held(self._session)
        rows = await self._fetch(_READ, {"conversation_id": conversation_id, "after_seq": after_seq})
        return [StoredMessage(**MESSAGES.open(self._cipher, row)) for row in rows]
