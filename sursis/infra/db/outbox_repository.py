"""SQL for the outbox and its dead letters. Like every repository, it never commits."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from sursis.domain.records.event_records import OutboxItem, Outgoing
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.base import session_cipher
from sursis.infra.db.sealing import DEAD_LETTERS, OUTBOX
from sursis.infra.db.unit_connection import UnitConnection

DELIVERED = "delivered"
PENDING = "pending"
DEAD = "dead"
DISCARDED = "discarded"


class SqlOutboxRepository:
    def __init__(self, session: UnitConnection) -> None:
        self._session = session
        self._cipher = session_cipher(session)

    async def enqueue(self, item: Outgoing, now: datetime) -> int:
        workspace, topic = item.workspace, item.topic
        outbox_id = await self._session.scalar(
            t.outbox.insert()
            .values(
                workspace=workspace,
                topic=topic,
                payload=OUTBOX.seal_value(
                    self._cipher,
                    "payload",
                    item.payload,
                    {"workspace": workspace, "topic": topic, "created_at": now},
                ),
                status=PENDING,
                attempts=0,
                last_error=None,
                source_event_id=None,
                created_at=now,
                updated_at=now,
                next_attempt_at=now,
                conversation_id=item.conversation_id,
            )
            .returning(t.outbox.c.id)
        )
        assert outbox_id is not None
        return int(outbox_id)

    async def claim_due(
        self, topic_prefix: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[OutboxItem]:
        c = t.outbox.c
        due = (
            sa.select(c.id)
            .where(
                c.status == t.status_literal(PENDING),
                c.topic.startswith(topic_prefix, autoescape=True),
                sa.or_(c.next_attempt_at.is_(None), c.next_attempt_at <= now),
            )
            .order_by(c.id)
            .limit(limit)
        )
        if self._session.get_bind().dialect.name == "postgresql":
            due = due.with_for_update(skip_locked=True)
        result = await self._session.execute(
            t.outbox.update()
            .where(c.id.in_(due.scalar_subquery()), c.status == PENDING)
            .values(attempts=c.attempts + 1, next_attempt_at=lease_until, updated_at=now)
            .returning(c.id, c.workspace, c.topic, c.payload, c.attempts, c.source_event_id, c.created_at)
        )
        items = [
            OutboxItem(
                id=row.id,
                workspace=row.workspace,
                topic=row.topic,
                payload=OUTBOX.open_value(self._cipher, "payload", row.payload, row._mapping),
                attempts=row.attempts,
                source_event_id=row.source_event_id,
            )
            for row in result
        ]
        return sorted(items, key=lambda item: item.id)

    async def mark_delivered(self, outbox_id: int, now: datetime) -> None:
        await self._session.execute(
            t.outbox.update()
            .where(t.outbox.c.id == outbox_id)
            .values(status=DELIVERED, delivered_at=now, last_error=None, updated_at=now, next_attempt_at=None)
        )

    async def schedule_retry(self, outbox_id: int, error: str, retry_at: datetime, now: datetime) -> None:
        await self._session.execute(
            t.outbox.update()
            .where(t.outbox.c.id == outbox_id)
            .values(last_error=error, next_attempt_at=retry_at, updated_at=now)
        )

    async def mark_dead(
        self, item: OutboxItem, error: str, cluster: tuple[str, str] | None, now: datetime
    ) -> str:
        """Give up on a row: it becomes a dead letter the `ops` agent can list and replay.

        A replayed delivery that fails again revives its original dead letter instead of adding
        another. `cluster` is `(id, title)` of the failure cluster the letter belongs to.
        """
        await self._session.execute(
            t.outbox.update()
            .where(t.outbox.c.id == item.id)
            .values(status=DEAD, last_error=error, next_attempt_at=None, updated_at=now)
        )
        cluster_id = await self._ensure_cluster(item.workspace, cluster, error, now) if cluster else None
        d = t.dead_letters.c
        letter_id = item.source_event_id or f"wh_{item.id}"
        revived = await self._session.execute(
            t.dead_letters.update()
            .where(d.id == letter_id, d.workspace == item.workspace)
            .values(status="dead", outbox_id=item.id, error=error, attempts=item.attempts, failed_at=now)
        )
        if int(revived.rowcount) == 0:  # type: ignore[attr-defined]
            await self._session.execute(
                t.dead_letters.insert().values(
                    id=letter_id,
                    workspace=item.workspace,
                    outbox_id=item.id,
                    topic=item.topic,
                    payload=DEAD_LETTERS.seal_value(
                        self._cipher, "payload", item.payload, {"workspace": item.workspace, "id": letter_id}
                    ),
                    error=error,
                    attempts=item.attempts,
                    cluster_id=cluster_id,
                    status="dead",
                    replay_count=0,
                    failed_at=now,
                    replayed_at=None,
                )
            )
        return letter_id

    async def _ensure_cluster(
        self, workspace: str, cluster: tuple[str, str], signature: str, now: datetime
    ) -> str:
        cluster_id, title = cluster
        c = t.failure_clusters.c
        touched = await self._session.execute(
            t.failure_clusters.update()
            .where(c.id == cluster_id, c.workspace == workspace)
            .values(last_seen=now, updated_at=now)
        )
        if int(touched.rowcount) == 0:  # type: ignore[attr-defined]
            await self._session.execute(
                t.failure_clusters.insert().values(
                    id=cluster_id,
                    workspace=workspace,
                    signature=signature[:500],
                    title=title,
                    status="open",
                    notes=None,
                    first_seen=now,
                    last_seen=now,
                    updated_at=now,
                )
            )
        return cluster_id

    async def discard(self, outbox_id: int, reason: str, now: datetime) -> None:
        await self._session.execute(
            t.outbox.update()
            .where(t.outbox.c.id == outbox_id)
            .values(status=DISCARDED, last_error=reason, next_attempt_at=None, updated_at=now)
        )

    async def status(self, outbox_id: int) -> str | None:
        value = await self._session.scalar(sa.select(t.outbox.c.status).where(t.outbox.c.id == outbox_id))
        return str(value) if value is not None else None
