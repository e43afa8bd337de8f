"""SQL for the outbox, dead letters and failure clusters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.infra.db import tables as t
from sursis.infra.db.repositories.base import session_cipher
from sursis.infra.db.sealing import DEAD_LETTERS, FAILURE_CLUSTERS, OUTBOX
from sursis.infra.db.unit_connection import UnitConnection


def _iso(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}


class SqlOpsRepository:
    def __init__(self, session: UnitConnection) -> None:
        self._session = session
        self._cipher = session_cipher(session)

    async def list_dead_letters(self, workspace: str, status: str | None, limit: int) -> list[dict[str, Any]]:
        c = t.dead_letters.c
        query = sa.select(
            c.id.label("event_id"),
            c.topic,
            c.error,
            c.attempts,
            c.cluster_id,
            c.status,
            c.replay_count,
            c.failed_at,
        ).where(c.workspace == workspace)
        if status:
            query = query.where(c.status == status)
        rows = await self._session.execute(query.order_by(c.failed_at.desc(), c.id).limit(limit))
        return [_iso(dict(r._mapping)) for r in rows]

    async def get_dead_letter(self, workspace: str, event_id: str) -> dict[str, Any] | None:
        c = t.dead_letters.c
        row = (
            await self._session.execute(
                sa.select(t.dead_letters).where(c.workspace == workspace, c.id == event_id)
            )
        ).first()
        if row is None:
            return None
        data = _iso(DEAD_LETTERS.open(self._cipher, row))
        data["event_id"] = data.pop("id")
        return data

    async def replay_dead_letter(
        self, workspace: str, event_id: str, reason: str, now: datetime
    ) -> dict[str, Any]:
        letter = await self.get_dead_letter(workspace, event_id)
        if letter is None:
            raise LookupError(event_id)
        outbox_id = await self._session.scalar(
            t.outbox.insert()
            .values(
                workspace=workspace,
                topic=letter["topic"],
                payload=OUTBOX.seal_value(
                    self._cipher,
                    "payload",
                    letter["payload"],
                    {"workspace": workspace, "topic": letter["topic"], "created_at": now},
                ),
                status="pending",
                attempts=0,
                last_error=None,
                source_event_id=event_id,
                conversation_id=sa.select(t.outbox.c.conversation_id)
                .where(t.outbox.c.id == letter["outbox_id"])
                .scalar_subquery(),
                created_at=now,
                updated_at=now,
            )
            .returning(t.outbox.c.id)
        )
        await self._session.execute(
            t.dead_letters.update()
            .where(t.dead_letters.c.id == event_id)
            .values(status="replayed", replay_count=t.dead_letters.c.replay_count + 1, replayed_at=now)
        )
        return {
            "event_id": event_id,
            "outbox_id": outbox_id,
            "replay_count": letter["replay_count"] + 1,
            "reason": reason,
        }

    async def list_clusters(self, workspace: str, status: str | None) -> list[dict[str, Any]]:
        c = t.failure_clusters.c
        d = t.dead_letters.c
        count = (
            sa.select(sa.func.count())
            .where(d.cluster_id == c.id)
            .correlate(t.failure_clusters)
            .scalar_subquery()
        )
        query = sa.select(
            c.id.label("cluster_id"), c.title, c.status, c.first_seen, c.last_seen, count.label("event_count")
        ).where(c.workspace == workspace)
        if status:
            query = query.where(c.status == status)
        rows = await self._session.execute(query.order_by(c.last_seen.desc(), c.id))
        return [_iso(dict(r._mapping)) for r in rows]

    async def get_cluster(self, workspace: str, cluster_id: str) -> dict[str, Any] | None:
        c = t.failure_clusters.c
        row = (
            await self._session.execute(
                sa.select(t.failure_clusters).where(c.workspace == workspace, c.id == cluster_id)
            )
        ).first()
        if row is None:
            return None
        data = _iso(FAILURE_CLUSTERS.open(self._cipher, row))
        data["cluster_id"] = data.pop("id")
        d = t.dead_letters.c
        events = await self._session.execute(
            sa.select(d.id.label("event_id"), d.topic, d.error, d.status, d.failed_at)
            .where(d.cluster_id == cluster_id)
            .order_by(d.failed_at.desc())
            .limit(50)
        )
        data["events"] = [_iso(dict(r._mapping)) for r in events]
        return data

    async def triage_cluster(
        self, workspace: str, cluster_id: str, status: str, notes: str, now: datetime
    ) -> dict[str, Any]:
        c = t.failure_clusters.c
        sealed = FAILURE_CLUSTERS.seal_value(self._cipher, "notes", notes, {"id": cluster_id})
        result = await self._session.execute(
            t.failure_clusters.update()
            .where(c.workspace == workspace, c.id == cluster_id)
            .values(status=status, notes=sealed, updated_at=now)
            .returning(c.id, c.status)
        )
        row = result.first()
        if row is None:
            raise LookupError(cluster_id)
        return {"cluster_id": row.id, "status": row.status, "notes": notes}

    async def add_dead_letter(self, row: dict[str, Any]) -> None:
        await self._session.execute(
            t.dead_letters.insert().values(**DEAD_LETTERS.seal(self._cipher, dict(row)))
        )

    async def add_cluster(self, row: dict[str, Any]) -> None:
        await self._session.execute(t.failure_clusters.insert().values(**row))
