"""The audit chain in SQL: sealing rows under the workspace's head lock, reading links, cutting."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from sursis.domain.audit_chain import GENESIS, ChainHead, ChainLink, audit_row_hash
from sursis.infra.db import retention_tables as r
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.audit import audit_entry
from sursis.infra.db.repositories.base import SqlRepository, rowcount

UNSEALED = t.audit_log.c.seq.is_(None)


class SqlAuditChainRepository(SqlRepository):
    """Rows are sealed in `seq` order by whoever holds the workspace's head row (`FOR UPDATE` on
    PostgreSQL; SQLite has one writer at a time), so concurrent sealers never interleave."""

    async def unsealed_workspaces(self, limit: int) -> list[str]:
        query = sa.select(t.audit_log.c.workspace).where(UNSEALED).distinct().limit(limit)
        return list(await self._session.scalars(query))

    async def unsealed_count(self, workspace: str) -> int:
        c = t.audit_log.c
        query = sa.select(sa.func.count()).where(c.workspace == workspace, UNSEALED)
        return int(await self._session.scalar(query) or 0)

    async def workspaces(self) -> list[str]:
        heads = sa.select(r.audit_chain_heads.c.workspace)
        unsealed = sa.select(t.audit_log.c.workspace).where(UNSEALED).distinct()
        return sorted(set(await self._session.scalars(heads)) | set(await self._session.scalars(unsealed)))

    async def head(self, workspace: str, *, lock: bool = False) -> ChainHead:
        h = r.audit_chain_heads
        query = sa.select(h).where(h.c.workspace == workspace)
        if lock and self._postgres:
            query = query.with_for_update()
        row = (await self._session.execute(query)).first()
        if row is None:
            return ChainHead(workspace, 0, GENESIS)
        m = row._mapping
        return ChainHead(workspace, m["seq"], m["hash"], m["anchor_seq"], m["anchor_hash"])

    async def seal(self, workspace: str, limit: int, now: datetime) -> int:
        """Seal up to `limit` of the workspace's unsealed rows, in id order; the number sealed."""
        h = r.audit_chain_heads
        first = {"workspace": workspace, "seq": 0, "hash": GENESIS, "anchor_seq": 0, "anchor_hash": GENESIS}
        await self._session.execute(self._insert(h).values(**first, updated_at=now).on_conflict_do_nothing())
        head = await self.head(workspace, lock=True)
        c = t.audit_log.c
        rows = await self._session.execute(
            sa.select(t.audit_log).where(c.workspace == workspace, UNSEALED).order_by(c.id).limit(limit)
        )
        seq, prev = head.seq, head.hash
        links: list[dict[str, object]] = []
        for row in rows:
            entry = audit_entry(row, self._cipher)
            seq, digest = seq + 1, audit_row_hash(prev, entry)
            links.append({"row_id": entry.id, "seq": seq, "prev_hash": prev, "hash": digest})
            prev = digest
        if not links:
            return 0
        await self._session.execute(
            t.audit_log.update()
            .where(c.id == sa.bindparam("row_id"), UNSEALED)
            .values(seq=sa.bindparam("seq"), prev_hash=sa.bindparam("prev_hash"), hash=sa.bindparam("hash")),
            links,
        )
        await self._session.execute(
            h.update().where(h.c.workspace == workspace).values(seq=seq, hash=prev, updated_at=now)
        )
        return len(links)

    async def links(self, workspace: str, after_seq: int, limit: int) -> list[ChainLink]:
        c = t.audit_log.c
        rows = await self._session.execute(
            sa.select(t.audit_log)
            .where(c.workspace == workspace, c.seq > after_seq)
            .order_by(c.seq)
            .limit(limit)
        )
        return [ChainLink(row.seq, row.prev_hash, row.hash, audit_entry(row, self._cipher)) for row in rows]

    async def cut(self, workspace: str, through: ChainLink, now: datetime) -> int:
        """Record `through` as the workspace's anchor, then delete the rows up to it (the guard
        trigger allows deleting only at or below the recorded anchor); the number deleted."""
        h = r.audit_chain_heads
        await self._session.execute(
            h.update()
            .where(h.c.workspace == workspace, h.c.anchor_seq < through.seq)
            .values(anchor_seq=through.seq, anchor_hash=through.hash, updated_at=now)
        )
        c = t.audit_log.c
        result = await self._session.execute(
            t.audit_log.delete().where(c.workspace == workspace, c.seq <= through.seq)
        )
        return rowcount(result)
