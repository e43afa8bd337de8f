"""A specialist's delegation: its message log, stored so a suspended specialist resumes where it stopped."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.infra.db import customer_tables as c
from sursis.infra.db.repositories.base import SqlRepository
from sursis.infra.db.sealing import DELEGATIONS


@dataclass(slots=True)
class Delegation:
    """One `delegate` call of a supervisor: `running` → `suspended` ⇄ `running` → `completed`."""

    conversation_id: uuid.UUID
    tool_call_id: str
    run_id: uuid.UUID
    specialist: str
    status: str
    messages: str
    deferred: dict[str, Any] | None
    output: str | None
    created_at: datetime
    updated_at: datetime


class SqlDelegationRepository(SqlRepository):
    async def get(self, conversation_id: uuid.UUID, tool_call_id: str) -> Delegation | None:
        row = (
            await self._session.execute(
                sa.select(c.delegations).where(
                    c.delegations.c.conversation_id == conversation_id,
                    c.delegations.c.tool_call_id == tool_call_id,
                )
            )
        ).first()
        return Delegation(**DELEGATIONS.open(self._cipher, row)) if row is not None else None

    async def save(self, delegation: Delegation) -> None:
        values = {
            "status": delegation.status,
            "messages": delegation.messages,
            "deferred": delegation.deferred,
            "output": delegation.output,
            "updated_at": delegation.updated_at,
        }
        DELEGATIONS.seal(
            self._cipher,
            values,
            {"conversation_id": delegation.conversation_id, "tool_call_id": delegation.tool_call_id},
        )
        statement = (
            self._insert(c.delegations)
            .values(
                conversation_id=delegation.conversation_id,
                tool_call_id=delegation.tool_call_id,
                run_id=delegation.run_id,
                specialist=delegation.specialist,
                created_at=delegation.created_at,
                **values,
            )
            .on_conflict_do_update(index_elements=["conversation_id", "tool_call_id"], set_=values)
        )
        await self._session.execute(statement)
