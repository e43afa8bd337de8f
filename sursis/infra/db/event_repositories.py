"""SQL for the event log and webhooks (the outbox: `outbox_repository`). Like every repository, they
never commit."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from sursis.domain.channels.records import BindingKind
from sursis.domain.encryption import Cipher
from sursis.domain.events import PENDING_EVENT_TYPES, EventType
from sursis.domain.records import StoredEvent, Webhook
from sursis.domain.states import RunStatus
from sursis.infra.db import channel_tables as ch
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.base import session_cipher
from sursis.infra.db.rows import row_values
from sursis.infra.db.sealing import EVENTS

NOTIFY_CHANNEL = "sursis_events"
PENDING_CHANNEL = "sursis_pending"
WORK_CHANNEL = "sursis_work"
"""A run was queued: workers wake and claim (and the run's waiters re-read it)."""
RUN_CHANNEL = "sursis_run"
"""A run settled (suspended, completed, failed, cancelled): its waiters re-read it."""
_SETTLING = {EventType.RUN_COMPLETED.value, EventType.RUN_FAILED.value}
_SETTLED = {s.value for s in RunStatus if s.settled}


def run_notification(event_type: str, data: dict[str, Any]) -> tuple[str, str] | None:
    """The channel and payload that tell other processes of the run change an event describes."""
    run_id = data.get("run_id")
    if not isinstance(run_id, str):
        return None
    if event_type in _SETTLING:
        return RUN_CHANNEL, run_id
    if event_type == EventType.RUN_STATUS.value:
        status = data.get("status")
        if status == RunStatus.QUEUED.value:
            return WORK_CHANNEL, run_id
        if status in _SETTLED:
            return RUN_CHANNEL, run_id
    return None


def _advisory_key(conversation_id: uuid.UUID) -> int:
    return int.from_bytes(conversation_id.bytes[:8], "big", signed=True)


def _event_from_row(row: Any, cipher: Cipher) -> StoredEvent:
    m = EVENTS.open(cipher, row)
    return StoredEvent(
        id=m["id"],
        conversation_id=m["conversation_id"],
        workspace=m["workspace"],
        type=m["type"],
        data=m["data"],
        created_at=m["created_at"],
    )


def _locked_insert() -> Any:
    """One event row, inserted after its conversation's lock is taken and its notifications are
    queued, in one statement: the sub-select's functions are volatile, so PostgreSQL evaluates
    them (never pulls them up or drops them) before the row, and its id, is produced."""
    text = sa.String()
    side_effects = sa.select(
        sa.func.pg_advisory_xact_lock(sa.bindparam("lock_key", type_=sa.BigInteger())).label("locked"),
        sa.func.pg_notify(NOTIFY_CHANNEL, sa.bindparam("conversation", type_=text)).label("event"),
        sa.case(
            (
                sa.bindparam("pending_workspace", type_=text).is_not(None),
                sa.func.pg_notify(PENDING_CHANNEL, sa.bindparam("pending_workspace", type_=text)),
            )
        ).label("pending"),
        sa.case(
            (
                sa.bindparam("run_channel", type_=text).is_not(None),
                sa.func.pg_notify(
                    sa.bindparam("run_channel", type_=text), sa.bindparam("run_id", type_=text)
                ),
            )
        ).label("run"),
    ).subquery("side_effects")
    c = t.events.c
    columns = [c.conversation_id, c.workspace, c.type, c.data, c.created_at]
    row = sa.select(*(sa.bindparam(column.name, type_=column.type) for column in columns))
    return t.events.insert().from_select(columns, row.select_from(side_effects))


_LOCKED_INSERT = _locked_insert()


class SqlEventRepository:
    """The append-only event log.

    Events are held and written together when the transaction commits (`flush`, called by the
    unit of work), as its last writes. On PostgreSQL each row's insert first takes a
    transaction-scoped advisory lock on its conversation, so ids of one conversation become
    visible in increasing order: a reader polling `id > last_seen` cannot skip an event whose
    transaction committed late (SQLite serializes every writer already); the same statement
    queues the notifications, delivered on commit to the listeners of other processes.
    `published` remembers the conversations touched and `pending_workspaces` the workspaces whose
    pending calls were created or resolved, for wake-ups after commit in this process, through
    the unit of work. A run's status event also notifies the run's channel (`notified_runs`), so
    the notifier need not send it again after the commit.
    """

    def __init__(self, session: AsyncSession) -> None:
        self._session = session
        self._cipher = session_cipher(session)
        self.published: set[uuid.UUID] = set()
        self.pending_workspaces: set[str] = set()
        self.notified_runs: set[uuid.UUID] = set()
        self._held: list[dict[str, Any]] = []

    def add(
        self, conversation_id: uuid.UUID, workspace: str, event_type: str, data: dict[str, Any], now: datetime
    ) -> None:
        self._held.append(
            {
                "conversation_id": conversation_id,
                "workspace": workspace,
                "type": event_type,
                "data": data,
                "created_at": now,
            }
        )
        self.published.add(conversation_id)
        if event_type in PENDING_EVENT_TYPES:
            self.pending_workspaces.add(workspace)

    async def append(
        self, conversation_id: uuid.UUID, workspace: str, event_type: str, data: dict[str, Any], now: datetime
    ) -> StoredEvent:
        await self.flush()
        self.add(conversation_id, workspace, event_type, data, now)
        [row] = self._take_held()
        event_id = await self._session.scalar(self._insert().returning(t.events.c.id), row)
        assert event_id is not None
        return StoredEvent(
            id=int(event_id),
            conversation_id=conversation_id,
            workspace=workspace,
            type=event_type,
            data=data,
            created_at=now,
        )

    async def flush(self) -> None:
        """Write the held events, in the order they were added: one statement, one round trip."""
        if self._held:
            await self._session.execute(self._insert(), self._take_held())

    def _insert(self) -> Any:
        return _LOCKED_INSERT if self._postgres else t.events.insert()

    @property
    def _postgres(self) -> bool:
        return self._session.get_bind().dialect.name == "postgresql"

    def _take_held(self) -> list[dict[str, Any]]:
        held, self._held = self._held, []
        if not self._postgres:
            return [EVENTS.seal(self._cipher, row) for row in held]
        for row in held:
            notification = run_notification(row["type"], row["data"])
            if notification is not None:
                self.notified_runs.add(uuid.UUID(notification[1]))
            pending = row["type"] in PENDING_EVENT_TYPES
            row.update(
                lock_key=_advisory_key(row["conversation_id"]),
                conversation=str(row["conversation_id"]),
                pending_workspace=row["workspace"] if pending else None,
                run_channel=notification[0] if notification else None,
                run_id=notification[1] if notification else None,
            )
            EVENTS.seal(self._cipher, row)
        return held

    async def after(self, conversation_id: uuid.UUID, after_id: int, limit: int) -> list[StoredEvent]:
        await self.flush()
        c = t.events.c
        rows = await self._session.execute(
            sa.select(t.events)
            .where(c.conversation_id == conversation_id, c.id > after_id)
            .order_by(c.id)
            .limit(limit)
        )
        return [_event_from_row(row, self._cipher) for row in rows]

    async def pending_after(self, workspace: str | None, after_id: int, limit: int) -> list[StoredEvent]:
        await self.flush()
        c = t.events.c
        query = sa.select(t.events).where(c.type.in_(PENDING_EVENT_TYPES), c.id > after_id)
        if workspace is not None:
            query = query.where(c.workspace == workspace)
        rows = await self._session.execute(query.order_by(c.id).limit(limit))
        return [_event_from_row(row, self._cipher) for row in rows]

    async def last_pending_id(self, workspace: str | None, created_before: datetime | None) -> int:
        await self.flush()
        c = t.events.c
        query = sa.select(c.id).where(c.type.in_(PENDING_EVENT_TYPES))
        if workspace is not None:
            query = query.where(c.workspace == workspace)
        if created_before is not None:
            query = query.where(c.created_at < created_before)
        found = await self._session.scalar(query.order_by(c.id.desc()).limit(1))
        return int(found) if found is not None else 0


def _webhook_from_row(row: Any) -> Webhook:
    m = row._mapping
    return Webhook(
        id=m["id"],
        workspace=m["workspace"],
        url=m["url"],
        events=tuple(m["events"]),
        secret=m["secret"],
        created_by=m["created_by"],
        created_at=m["created_at"],
    )


_WEBHOOK_ORDER = (t.webhooks.c.created_at, t.webhooks.c.id)
_WORKSPACE_WEBHOOKS = (
    sa.select(t.webhooks).where(t.webhooks.c.workspace == sa.bindparam("workspace")).order_by(*_WEBHOOK_ORDER)
)
"""Read by every transaction that publishes an event a webhook may subscribe to: built once."""


def _may_deliver() -> Any:
    b = ch.channel_bindings.c
    webhooks = sa.select(t.webhooks.c.id).where(t.webhooks.c.workspace == sa.bindparam("workspace"))
    bindings = sa.select(b.id).where(
        b.workspace == sa.bindparam("workspace"),
        b.kind.in_([k.value for k in BindingKind]),
        sa.or_(b.conversation_id == sa.bindparam("conversation_id"), b.conversation_id.is_(None)),
    )
    return sa.select(sa.or_(webhooks.exists(), bindings.exists()))


_MAY_DELIVER = _may_deliver()
DELIVERY_INFO_KEY = "sursis.may_deliver"
"""The session's `info` entry caching `may_deliver` for the transaction; adding or removing a
webhook or a channel binding drops it (`forget_delivery_targets`)."""


def forget_delivery_targets(session: AsyncSession) -> None:
    session.info.pop(DELIVERY_INFO_KEY, None)


class SqlWebhookRepository:
    def __init__(self, session: AsyncSession) -> None:
        self._session = session
        self._subscriptions: dict[str, list[Webhook]] = {}
        """A workspace's webhooks as this transaction read them (one look-up per transaction)."""

    async def add(self, webhook: Webhook) -> None:
        self._subscriptions.clear()
        forget_delivery_targets(self._session)
        await self._session.execute(
            t.webhooks.insert().values(row_values(webhook, t.webhooks, events=list(webhook.events)))
        )

    async def get(self, webhook_id: uuid.UUID) -> Webhook | None:
        row = (
            await self._session.execute(sa.select(t.webhooks).where(t.webhooks.c.id == webhook_id))
        ).first()
        return _webhook_from_row(row) if row else None

    async def for_workspace(self, workspace: str | None) -> list[Webhook]:
        if workspace is None:
            rows = await self._session.execute(sa.select(t.webhooks).order_by(*_WEBHOOK_ORDER))
        else:
            rows = await self._session.execute(_WORKSPACE_WEBHOOKS, {"workspace": workspace})
        return [_webhook_from_row(row) for row in rows]

    async def delete(self, webhook_id: uuid.UUID) -> bool:
        self._subscriptions.clear()
        forget_delivery_targets(self._session)
        result = await self._session.execute(t.webhooks.delete().where(t.webhooks.c.id == webhook_id))
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def may_deliver(self, workspace: str, conversation_id: uuid.UUID) -> bool:
        known: dict[tuple[str, uuid.UUID], bool] = self._session.info.setdefault(DELIVERY_INFO_KEY, {})
        found = known.get((workspace, conversation_id))
        if found is None:
            params = {"workspace": workspace, "conversation_id": conversation_id}
            found = known[(workspace, conversation_id)] = bool(
                await self._session.scalar(_MAY_DELIVER, params)
            )
        return found

    async def subscribed(self, workspace: str, event_type: str) -> list[Webhook]:
        # Few webhooks per workspace: filtering the JSON list here stays portable across dialects.
        hooks = self._subscriptions.get(workspace)
        if hooks is None:
            hooks = self._subscriptions[workspace] = await self.for_workspace(workspace)
        return [w for w in hooks if event_type in w.events]
