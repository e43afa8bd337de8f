"""The customer context's workspace rows and platform events in SQL."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.records import Conversation
from sursis.domain.records.customer_records import (
    Intake,
    ListedConversation,
    PlatformEvent,
    PlatformEventType,
    Rubric,
    ScanReport,
)
from sursis.infra.db import customer_tables as c
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.base import SqlRepository, rowcount


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _scan(row: Any) -> dict[str, Any]:
    m = dict(row._mapping)
    return {
        "scan_id": m["id"],
        "status": m["status"],
        "verdict": m["verdict"],
        "scores": m["scores"],
        "changeset": m["changeset"],
        "failures": m["failures"],
        "completed_at": _iso(m["completed_at"]),
        "rerun_count": m["rerun_count"],
    }


class SqlWorkspaceRepository(SqlRepository):
    async def add_event(
        self, event: PlatformEvent, received_at: datetime, received_by: str, conversation_id: uuid.UUID | None
    ) -> bool:
        statement = (
            self._insert(c.platform_events)
            .values(
                workspace=event.workspace,
                id=event.id,
                type=event.type.value,
                data=event.data,
                occurred_at=event.occurred_at,
                received_at=received_at,
                received_by=received_by,
                conversation_id=conversation_id,
            )
            .on_conflict_do_nothing(index_elements=["workspace", "id"])
        )
        return rowcount(await self._session.execute(statement)) == 1

    async def get_event(self, workspace: str, event_id: str) -> Intake | None:
        row = (
            await self._session.execute(
                sa.select(c.platform_events).where(
                    c.platform_events.c.workspace == workspace, c.platform_events.c.id == event_id
                )
            )
        ).first()
        if row is None:
            return None
        run_id = None
        if row.conversation_id is not None:
            run_id = (
                await self._session.execute(
                    sa.select(t.runs.c.id)
                    .where(t.runs.c.conversation_id == row.conversation_id)
                    .order_by(t.runs.c.created_at)
                    .limit(1)
                )
            ).scalar()
        return Intake(
            event_id=row.id,
            type=PlatformEventType(row.type),
            workspace=row.workspace,
            duplicate=True,
            received_at=row.received_at,
            conversation_id=row.conversation_id,
            run_id=run_id,
        )

    async def count_events(self, workspace: str) -> int:
        return int(
            (
                await self._session.execute(
                    sa.select(sa.func.count()).where(c.platform_events.c.workspace == workspace)
                )
            ).scalar_one()
        )

    async def upsert_scan(self, workspace: str, scan: ScanReport, now: datetime) -> None:
        values = {
            "status": scan.status,
            "verdict": scan.verdict,
            "scores": dict(scan.scores),
            "changeset": dict(scan.changeset),
            "failures": scan.failures_json(),
            "completed_at": scan.completed_at or now,
            "updated_at": now,
        }
        statement = (
            self._insert(c.scans)
            .values(workspace=workspace, id=scan.id, **values)
            .on_conflict_do_update(index_elements=["workspace", "id"], set_=values)
        )
        await self._session.execute(statement)

    async def add_errors(self, workspace: str, errors: Sequence[Mapping[str, Any]], now: datetime) -> None:
        if errors:
            await self._session.execute(
                c.workspace_errors.insert(),
                [
                    {
                        "workspace": workspace,
                        "source": e["source"],
                        "scan_id": e.get("scan_id"),
                        "message": e["message"],
                        "occurred_at": e.get("occurred_at") or now,
                    }
                    for e in errors
                ],
            )

    async def set_framework(self, workspace: str, config: Mapping[str, Any], now: datetime) -> int:
        """Store the configuration as the next version; concurrent writers each get their own."""
        table = c.framework_configs
        statement = (
            self._insert(table)
            .values(workspace=workspace, config=dict(config), version=1, updated_at=now)
            .on_conflict_do_update(
                index_elements=["workspace"],
                set_={"config": dict(config), "version": table.c.version + 1, "updated_at": now},
            )
            .returning(table.c.version)
        )
        return int((await self._session.execute(statement)).scalar_one())

    async def set_rubrics(self, workspace: str, rubrics: Sequence[Rubric]) -> None:
        await self._session.execute(sa.delete(c.rubrics).where(c.rubrics.c.workspace == workspace))
        if rubrics:
            await self._session.execute(
                c.rubrics.insert(),
                [
                    {
                        "workspace": workspace,
                        "name": r.name,
                        "description": r.description,
                        "threshold": r.threshold,
                        "weight": r.weight,
                    }
                    for r in rubrics
                ],
            )

    async def set_onboarding(self, workspace: str, onboarding: Mapping[str, Any], now: datetime) -> None:
        values = {
            "steps_done": list(onboarding["steps_done"]),
            "steps_todo": list(onboarding["steps_todo"]),
            "trace_ingestion": onboarding["trace_ingestion"],
            "updated_at": now,
        }
        statement = (
            self._insert(c.onboarding)
            .values(workspace=workspace, **values)
            .on_conflict_do_update(index_elements=["workspace"], set_=values)
        )
        await self._session.execute(statement)

    async def list_scans(self, workspace: str, limit: int) -> list[dict[str, Any]]:
        rows = await self._session.execute(
            sa.select(c.scans)
            .where(c.scans.c.workspace == workspace)
            .order_by(c.scans.c.completed_at.desc(), c.scans.c.id)
            .limit(limit)
        )
        return [_scan(r) for r in rows]

    async def get_scan(self, workspace: str, scan_id: str) -> dict[str, Any] | None:
        row = (
            await self._session.execute(
                sa.select(c.scans).where(c.scans.c.workspace == workspace, c.scans.c.id == scan_id)
            )
        ).first()
        return _scan(row) if row is not None else None

    async def get_framework(self, workspace: str) -> dict[str, Any] | None:
        row = (
            await self._session.execute(
                sa.select(c.framework_configs).where(c.framework_configs.c.workspace == workspace)
            )
        ).first()
        if row is None:
            return None
        return {"config": row.config, "version": row.version, "updated_at": _iso(row.updated_at)}

    async def get_rubrics(self, workspace: str) -> list[dict[str, Any]]:
        rows = await self._session.execute(
            sa.select(c.rubrics).where(c.rubrics.c.workspace == workspace).order_by(c.rubrics.c.name)
        )
        return [
            {"name": r.name, "description": r.description, "threshold": r.threshold, "weight": r.weight}
            for r in rows
        ]

    async def get_onboarding(self, workspace: str) -> dict[str, Any] | None:
        row = (
            await self._session.execute(sa.select(c.onboarding).where(c.onboarding.c.workspace == workspace))
        ).first()
        if row is None:
            return None
        return {
            "steps_done": row.steps_done,
            "steps_todo": row.steps_todo,
            "trace_ingestion": row.trace_ingestion,
            "updated_at": _iso(row.updated_at),
        }

    async def recent_errors(self, workspace: str, limit: int) -> list[dict[str, Any]]:
        rows = await self._session.execute(
            sa.select(c.workspace_errors)
            .where(c.workspace_errors.c.workspace == workspace)
            .order_by(c.workspace_errors.c.id.desc())
            .limit(limit)
        )
        return [
            {
                "source": r.source,
                "scan_id": r.scan_id,
                "message": r.message,
                "occurred_at": _iso(r.occurred_at),
            }
            for r in rows
        ]

    async def recent_conversations(
        self, workspace: str | None, limit: int, after: tuple[datetime, uuid.UUID] | None = None
    ) -> list[ListedConversation]:
        e = c.platform_events
        conversations = t.conversations.c
        query = (
            sa.select(t.conversations, e.c.id.label("event_id"), e.c.type.label("event_type"))
            .outerjoin(e, e.c.conversation_id == t.conversations.c.id)
            .order_by(conversations.created_at.desc(), conversations.id.desc())
            .limit(limit)
        )
        if workspace is not None:
            query = query.where(conversations.workspace == workspace)
        if after is not None:
            at, last_id = after
            query = query.where(
                sa.or_(
                    conversations.created_at < at,
                    sa.and_(conversations.created_at == at, conversations.id < last_id),
                )
            )
        listed = []
        for row in await self._session.execute(query):
            m = dict(row._mapping)
            event_id, event_type = m.pop("event_id"), m.pop("event_type")
            listed.append(
                ListedConversation(
                    conversation=Conversation(**m),
                    initiator="system" if event_id is not None else "user",
                    event_id=event_id,
                    event_type=event_type,
                )
            )
        return listed

    async def mark_rerun(self, workspace: str, scan_id: str, now: datetime) -> dict[str, Any] | None:
        result = await self._session.execute(
            sa.update(c.scans)
            .where(c.scans.c.workspace == workspace, c.scans.c.id == scan_id)
            .values(status="queued", rerun_count=c.scans.c.rerun_count + 1, updated_at=now)
        )
        if rowcount(result) == 0:
            return None
        return await self.get_scan(workspace, scan_id)
