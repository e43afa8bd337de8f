"""The pinned descriptions of MCP tools in SQL (`sursis.domain.agents.mcp_pins`).

Each method is its own transaction: a pin is read or written as a process meets a tool, outside
any segment's unit of work, and an admin's acceptance commits with its audit row.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.agents.mcp_pins import ACCEPTED, FIRST_SEEN, McpPin, PinCheck
from sursis.domain.records import AuditEntry, Principal
from sursis.infra.db.mcp_pin_tables import mcp_tool_pins
from sursis.infra.db.repositories.base import dialect_insert, rowcount
from sursis.infra.db.uow import SqlUnitOfWorkFactory

_p = mcp_tool_pins.c


def _pin(row: Any) -> McpPin:
    m = row._mapping
    return McpPin(**{c.name: m[c.name] for c in mcp_tool_pins.c})


class SqlMcpPinStore:
    """`McpPinStore` over the service's database."""

    def __init__(self, uow: SqlUnitOfWorkFactory) -> None:
        self._uow = uow

    async def check(
        self,
        agent: str,
        tool: str,
        server: str,
        digest: str,
        description: Mapping[str, Any],
        now: datetime,
    ) -> PinCheck:
        """Pin a tool seen for the first time; record a description other than the accepted one."""
        key = sa.and_(_p.agent == agent, _p.tool == tool)
        row = await self._row(key)
        if row is None:
            async with self._uow() as tx:
                postgres = tx.session.get_bind().dialect.name == "postgresql"
                insert = dialect_insert(mcp_tool_pins, postgres=postgres).values(
                    agent=agent,
                    tool=tool,
                    server=server,
                    digest=digest,
                    description=dict(description),
                    accepted_by=FIRST_SEEN,
                    accepted_at=now,
                )
                await tx.session.execute(insert.on_conflict_do_nothing(index_elements=["agent", "tool"]))
                await tx.commit()
            row = await self._row(key)
        pin = _pin(row)
        if pin.digest == digest:
            if pin.changed_digest is not None:  # the server went back to what was accepted
                cleared = {"changed_digest": None, "changed_description": None, "changed_at": None}
                await self._update(sa.and_(key, _p.digest == digest), cleared)
            return PinCheck(True, pin)
        if pin.changed_digest != digest:
            change = {"changed_digest": digest, "changed_description": dict(description), "changed_at": now}
            await self._update(sa.and_(key, _p.digest == pin.digest), change)
        return PinCheck(False, pin)

    async def _row(self, key: Any) -> Any:
        async with self._uow.reader() as tx:
            return (await tx.session.execute(sa.select(mcp_tool_pins).where(key))).first()

    async def _update(self, where: Any, values: dict[str, Any]) -> None:
        async with self._uow() as tx:
            await tx.session.execute(mcp_tool_pins.update().where(where).values(**values))
            await tx.commit()

    async def pins(self, *, changed_only: bool) -> list[McpPin]:
        query = sa.select(mcp_tool_pins).order_by(_p.agent, _p.tool)
        if changed_only:
            query = query.where(_p.changed_digest.is_not(None))
        async with self._uow.reader() as tx:
            return [_pin(row) for row in (await tx.session.execute(query)).all()]

    async def accept(self, agent: str, tool: str, digest: str, by: Principal, now: datetime) -> McpPin | None:
        key = sa.and_(_p.agent == agent, _p.tool == tool)
        async with self._uow() as tx:
            row = (await tx.session.execute(sa.select(mcp_tool_pins).where(key))).first()
            if row is None or row.changed_digest != digest:
                return None
            previous = _pin(row)
            accepted = (
                mcp_tool_pins.update()
                .where(key, _p.changed_digest == digest)
                .values(
                    digest=digest,
                    description=_p.changed_description,
                    accepted_by=by.id,
                    accepted_at=now,
                    changed_digest=None,
                    changed_description=None,
                    changed_at=None,
                )
            )
            if rowcount(await tx.session.execute(accepted)) != 1:
                return None
            details = {
                "agent": agent,
                "tool_name": tool,
                "server": previous.server,
                "digest": digest,
                "previous_digest": previous.digest,
                "previous_accepted_by": previous.accepted_by,
            }
            workspace = by.workspace or "default"
            await tx.audit.append(AuditEntry(ACCEPTED, by.id, workspace, details=details), now)
            row = (await tx.session.execute(sa.select(mcp_tool_pins).where(key))).first()
            await tx.commit()
            return _pin(row)
