"""Tool call records in SQL."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from sursis.domain.encryption import Cipher
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.records import (
    ToolCallMetadata,
    ToolCallRecord,
)
from sursis.domain.tools import Category
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.base import SqlRepository, dialect_insert, rowcount
from sursis.infra.db.rows import record_from_row, row_values
from sursis.infra.db.sealing import TOOL_CALLS


def tool_call_from_row(row: Any, cipher: Cipher) -> ToolCallRecord:
    opened = TOOL_CALLS.open_row(cipher, row)
    category = opened._mapping["category"]
    metadata = record_from_row(ToolCallMetadata, opened, category=Category(category) if category else None)
    policy = opened._mapping["policy"]
    return record_from_row(
        ToolCallRecord, opened, metadata=metadata, policy=PolicyDecision.from_json(policy) if policy else None
    )


_c = t.tool_calls.c
_RECORD = {
    postgres: dialect_insert(t.tool_calls, postgres=postgres).on_conflict_do_nothing(
        index_elements=["conversation_id", "tool_call_id"]
    )
    for postgres in (False, True)
}
_FOR_IDS = sa.select(t.tool_calls).where(
    _c.conversation_id == sa.bindparam("conversation_id"),
    _c.tool_call_id.in_(sa.bindparam("ids", expanding=True)),
)


class SqlToolCallRepository(SqlRepository):
    async def record(self, record: ToolCallRecord) -> bool:
        values = TOOL_CALLS.seal(
            self._cipher,
            row_values(
                record,
                t.tool_calls,
                **row_values(record.metadata, t.tool_calls),
                policy=record.policy.to_json() if record.policy is not None else None,
            ),
        )
        return rowcount(await self._session.execute(_RECORD[self._postgres], values)) == 1

    async def get(self, conversation_id: uuid.UUID, tool_call_id: str) -> ToolCallRecord | None:
        c = t.tool_calls.c
        row = (
            await self._session.execute(
                sa.select(t.tool_calls).where(
                    c.conversation_id == conversation_id, c.tool_call_id == tool_call_id
                )
            )
        ).first()
        return tool_call_from_row(row, self._cipher) if row else None

    async def for_ids(
        self, conversation_id: uuid.UUID, tool_call_ids: Sequence[str]
    ) -> dict[str, ToolCallRecord]:
        rows = await self._session.execute(
            _FOR_IDS, {"conversation_id": conversation_id, "ids": list(tool_call_ids)}
        )
        return {
            record.tool_call_id: record for record in (tool_call_from_row(row, self._cipher) for row in rows)
        }

    async def for_run(self, run_id: uuid.UUID) -> list[ToolCallRecord]:
        c = t.tool_calls.c
        rows = await self._session.execute(sa.select(t.tool_calls).where(c.run_id == run_id).order_by(c.id))
        return [tool_call_from_row(row, self._cipher) for row in rows]
