"""Tool call records in SQL."""

from __future__ import annotations

import functools
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
from sursis.infra.db.held import HELD_KEY, HeldUpdate, flush_held, hold, holds, insert_cte
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


@functools.cache
def _held_outcome(columns: tuple[str, ...]) -> HeldUpdate:
    """`record_outcome` held to the commit: the held insert of `columns`, kept from a second row
    of the same call as the statement `_RECORD` keeps it."""
    cte = insert_cte(t.tool_calls, columns, "{param}")
    insert = cte.partition(" AS (")[2]
    return HeldUpdate(_HELD_NAME, insert[:-1] + " ON CONFLICT (conversation_id, tool_call_id) DO NOTHING")


_HELD_NAME = "held_tool_calls"


class SqlToolCallRepository(SqlRepository):
    async def record(self, record: ToolCallRecord) -> bool:
        await self._flush_outcomes()
        return rowcount(await self._session.execute(_RECORD[self._postgres], self._values(record))) == 1

    async def record_outcome(self, record: ToolCallRecord) -> None:
        values = self._values(record)
        if holds(self._session):
            hold(self._session, _held_outcome(tuple(values)), [values])  # written at commit, with the events
            return
        await self._session.execute(_RECORD[self._postgres], values)

    async def _flush_outcomes(self) -> None:
        """Write what the transaction holds before this table is read or written again, when it
        holds an outcome of this table (nothing is sent otherwise)."""
        held = self._session.info.get(HELD_KEY, {})
        if any(isinstance(target, HeldUpdate) and target.name == _HELD_NAME for target in held):
            await flush_held(self._session)

    def _values(self, record: ToolCallRecord) -> dict[str, Any]:
        return TOOL_CALLS.seal(
            self._cipher,
            row_values(
                record,
                t.tool_calls,
                **row_values(record.metadata, t.tool_calls),
                policy=record.policy.to_json() if record.policy is not None else None,
            ),
        )

    async def get(self, conversation_id: uuid.UUID, tool_call_id: str) -> ToolCallRecord | None:
        await self._flush_outcomes()
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
        await self._flush_outcomes()
        rows = await self._session.execute(
            _FOR_IDS, {"conversation_id": conversation_id, "ids": list(tool_call_ids)}
        )
        return {
            record.tool_call_id: record for record in (tool_call_from_row(row, self._cipher) for row in rows)
        }

    async def for_run(self, run_id: uuid.UUID) -> list[ToolCallRecord]:
        await self._flush_outcomes()
        c = t.tool_calls.c
        rows = await self._session.execute(sa.select(t.tool_calls).where(c.run_id == run_id).order_by(c.id))
        return [tool_call_from_row(row, self._cipher) for row in rows]
