"""Tool call records in SQL."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa

from abeyance.domain.records import (
    ToolCallMetadata,
    ToolCallRecord,
)
from abeyance.infra.db import tables as t
from abeyance.infra.db.repositories.base import SqlRepository, rowcount


def _tool_call_from_row(row: Any) -> ToolCallRecord:
    m = row._mapping
    return ToolCallRecord(
        conversation_id=m["conversation_id"],
        run_id=m["run_id"],
        tool_call_id=m["tool_call_id"],
        metadata=ToolCallMetadata(
            tool_name=m["tool_name"],
            agent_name=m["agent_name"],
            latency_ms=m["latency_ms"],
            ok=m["ok"],
            error_class=m["error_class"],
            trace_id=m["trace_id"],
            started_at=m["started_at"],
            ended_at=m["ended_at"],
        ),
        result=m["result"],
        error_code=m["error_code"],
    )


class SqlToolCallRepository(SqlRepository):
    async def record(self, record: ToolCallRecord) -> bool:
        md = record.metadata
        statement = (
            self._insert(t.tool_calls)
            .values(
                conversation_id=record.conversation_id,
                run_id=record.run_id,
                tool_call_id=record.tool_call_id,
                tool_name=md.tool_name,
                agent_name=md.agent_name,
                ok=md.ok,
                error_class=md.error_class,
                error_code=record.error_code,
                latency_ms=md.latency_ms,
                trace_id=md.trace_id,
                result=record.result,
                started_at=md.started_at,
                ended_at=md.ended_at,
            )
            .on_conflict_do_nothing(index_elements=["conversation_id", "tool_call_id"])
        )
        return rowcount(await self._session.execute(statement)) == 1

    async def get(self, conversation_id: uuid.UUID, tool_call_id: str) -> ToolCallRecord | None:
        c = t.tool_calls.c
        row = (
            await self._session.execute(
                sa.select(t.tool_calls).where(
                    c.conversation_id == conversation_id, c.tool_call_id == tool_call_id
                )
            )
        ).first()
        return _tool_call_from_row(row) if row else None

    async def for_run(self, run_id: uuid.UUID) -> list[ToolCallRecord]:
        c = t.tool_calls.c
        rows = await self._session.execute(sa.select(t.tool_calls).where(c.run_id == run_id).order_by(c.id))
        return [_tool_call_from_row(row) for row in rows]
