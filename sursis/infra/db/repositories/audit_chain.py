"""The audit chain in SQL: sealing rows under the workspace's head lock, reading links, cutting."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from sursis.domain.audit.audit_chain import GENESIS, ChainHead, ChainLink, audit_row_hash
from sursis.domain.audit.audit_checkpoint import Checkpoint
from sursis.domain.encryption import EncryptedValueUnreadable, EncryptionKeyUnavailable
from sursis.domain.records import AuditEntry
from sursis.infra.db import retention_tables as r
from sursis.infra.db import tables as t
from sursis.infra.db.held import encode_rows
from sursis.infra.db.repositories.audit import audit_entry
from sursis.infra.db.repositories.base import SqlRepository, rowcount

UNSEALED = t.audit_log.c.seq.is_(None)

_SEAL_ROW = (
    t.audit_log.update()
    .where(t.audit_log.c.id == sa.bindparam("row_id"), UNSEALED)
    .values(seq=sa.bindparam("seq"), prev_hash=sa.bindparam("prev_hash"), hash=sa.bindparam("hash"))
)
"""SQLite: one row's link, executed once a row."""
_SEAL_ROWS = sa.text(
    "UPDATE audit_log a SET seq = x.seq, prev_hash = x.prev_hash, hash = x.hash "
    "FROM jsonb_to_recordset(CAST(:links AS JSONB)) "
    "AS x(row_id integer, seq bigint, prev_hash varchar, hash varchar) "
    "WHERE a.id = x.row_id AND a.seq IS NULL"
).bindparams(sa.bindparam("links", type_=sa.Text()))
"""PostgreSQL: a batch's links as one statement, one JSON document of rows, instead of one
execution a row (each its own executor start: about a tenth of a turn's statement time)."""


def _opened(row: Any, cipher: Any) -> tuple[AuditEntry, str | None]:
    """The row's entry, or (when its content does not open) the entry without details and why."""
    try:
        return audit_entry(row, cipher), None
    except (EncryptionKeyUnavailable, EncryptedValueUnreadable) as exc:
        m = row._mapping
        entry = AuditEntry(
            m["action"],
            m["actor"],
            m["workspace"],
            m["conversation_id"],
            m["run_id"],
            m["correlation_id"],
            details={},
            id=m["id"],
            at=m["at"],
            trace_id=m["trace_id"],
        )
        return entry, exc.code


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
        return ChainHead(workspace, m["seq"], m["hash"], m["anchor_seq"], m["anchor_hash"], m["sealed_at"])

    async def seal(self, workspace: str, limit: int, now: datetime, tolerance: timedelta) -> int:
        """Seal up to `limit` of the workspace's unsealed rows, in id order; the number sealed.

        A row dated more than `tolerance` before the newest sealed row is refused (left unsealed,
        and reported by `verify`): a back-dated insert never enters the chain. A row whose content
        does not open is left unsealed too (its hash cannot be computed)."""
        h = r.audit_chain_heads
        first = {"workspace": workspace, "seq": 0, "hash": GENESIS, "anchor_seq": 0, "anchor_hash": GENESIS}
        await self._session.execute(self._insert(h).values(**first, updated_at=now).on_conflict_do_nothing())
        head = await self.head(workspace, lock=True)
        c = t.audit_log.c
        query = sa.select(t.audit_log).where(c.workspace == workspace, UNSEALED)
        if head.sealed_at is not None:
            query = query.where(c.at >= head.sealed_at - tolerance)
        rows = await self._session.execute(query.order_by(c.id).limit(limit))
        seq, prev, newest = head.seq, head.hash, head.sealed_at
        links: list[dict[str, object]] = []
        for row in rows:
            entry, unreadable = _opened(row, self._cipher)
            if unreadable is not None or entry.at is None:
                continue
            if newest is not None and entry.at < newest - tolerance:
                continue  # dated before a row sealed earlier in this batch
            seq, digest = seq + 1, audit_row_hash(prev, entry)
            links.append({"row_id": entry.id, "seq": seq, "prev_hash": prev, "hash": digest})
            prev, newest = digest, entry.at if newest is None else max(newest, entry.at)
        if not links:
            return 0
        if self._postgres:
            await self._session.execute(_SEAL_ROWS, {"links": encode_rows(links)})
        else:
            await self._session.execute(_SEAL_ROW, links)
        await self._session.execute(
            h.update()
            .where(h.c.workspace == workspace)
            .values(seq=seq, hash=prev, sealed_at=newest, updated_at=now)
        )
        return len(links)

    async def backdated_count(self, workspace: str, tolerance: timedelta) -> int:
        """Unsealed rows sealing refuses: dated more than `tolerance` before the newest sealed row."""
        head = await self.head(workspace)
        if head.sealed_at is None:
            return 0
        c = t.audit_log.c
        query = sa.select(sa.func.count()).where(
            c.workspace == workspace, UNSEALED, c.at < head.sealed_at - tolerance
        )
        return int(await self._session.scalar(query) or 0)

    async def checkpoint(self, workspace: str) -> Checkpoint | None:
        k = r.audit_checkpoints
        row = (await self._session.execute(sa.select(k).where(k.c.workspace == workspace))).first()
        return Checkpoint(**row._mapping) if row else None

    async def has_checkpoints(self) -> bool:
        k = r.audit_checkpoints
        found = await self._session.execute(sa.select(k.c.workspace).limit(1))
        return found.first() is not None

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        k = r.audit_checkpoints
        values = {
            "workspace": checkpoint.workspace,
            "seq": checkpoint.seq,
            "hash": checkpoint.hash,
            "anchor_seq": checkpoint.anchor_seq,
            "anchor_hash": checkpoint.anchor_hash,
            "signed_at": checkpoint.signed_at,
            "signer": checkpoint.signer,
            "signature": checkpoint.signature,
        }
        insert = self._insert(k).values(**values)
        await self._session.execute(
            insert.on_conflict_do_update(
                index_elements=[k.c.workspace], set_={name: insert.excluded[name] for name in values}
            )
        )

    async def links(self, workspace: str, after_seq: int, limit: int) -> list[ChainLink]:
        c = t.audit_log.c
        rows = await self._session.execute(
            sa.select(t.audit_log)
            .where(c.workspace == workspace, c.seq > after_seq)
            .order_by(c.seq)
            .limit(limit)
        )
        return [ChainLink(row.seq, row.prev_hash, row.hash, *_opened(row, self._cipher)) for row in rows]

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
