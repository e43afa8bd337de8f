"""SQL for the event log and webhooks (the outbox: `outbox_repository`). Like every repository, they
never commit."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.encryption import Cipher
from sursis.domain.events.events import PENDING_EVENT_TYPES, EventType
from sursis.domain.notifications.delivery import DELIVERED_EVENT_TYPES
from sursis.domain.records.channel_records import BindingKind
from sursis.domain.records.event_records import StoredEvent, Webhook
from sursis.domain.states import RunStatus
from sursis.infra.db import channel_tables as ch
from sursis.infra.db import tables as t
from sursis.infra.db.driver_statements import AVAILABLE, fetch_rows
from sursis.infra.db.held import (
    Guard,
    GuardFailed,
    encode_rows,
    failed_guard,
    guard_statement,
    held_params,
    take_guard,
    take_held,
)
from sursis.infra.db.held_write import held_write
from sursis.infra.db.repositories.base import session_cipher
from sursis.infra.db.rows import row_values
from sursis.infra.db.sealing import EVENTS
from sursis.infra.db.unit_connection import UnitConnection

WORK_CHANNEL = "sursis_work"
"""A run was queued: workers wake and claim (and the run's waiters re-read it)."""
RUN_CHANNEL = "sursis_run"
"""A run settled (suspended, completed, failed, cancelled): its waiters re-read it."""
AUTOCOMMIT = {"isolation_level": "AUTOCOMMIT"}
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


def _stored(event_id: int, row: Mapping[str, Any] | StoredEvent) -> StoredEvent:
    """A held row (plaintext) as the event it becomes once written with `event_id`."""
    if isinstance(row, StoredEvent):
        return dataclasses.replace(row, id=event_id)
    return StoredEvent(
        id=event_id,
        conversation_id=row["conversation_id"],
        workspace=row["workspace"],
        type=row["type"],
        data=row["data"],
        created_at=row["created_at"],
    )


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


def forget_delivery_targets(session: UnitConnection) -> None:
    session.info.pop(DELIVERY_INFO_KEY, None)


class SqlEventRepository:
    """The append-only event log.

    Events are held and written together when the transaction commits (`flush`, called by the
    unit of work), as its last writes, with the transaction's audit rows. On PostgreSQL the
    statement first takes a transaction-scoped advisory lock on each event's conversation, so ids
    of one conversation become visible in increasing order: a reader polling `id > last_seen`
    cannot skip an event whose transaction committed late (SQLite serializes every writer already);
    the same statement queues the notifications, delivered on commit to the listeners of other
    processes. `published` remembers the conversations touched and `pending_workspaces` the
    workspaces whose pending calls were created or resolved, for wake-ups after commit in this
    process, through the unit of work. A run's status event also notifies the run's channel
    (`notified_runs`), so the notifier need not send it again after the commit. The events written
    that a webhook or a channel binding may hear of wait in `take_undelivered` for the unit of work.
    """

    def __init__(self, session: UnitConnection) -> None:
        self._session = session
        self._cipher = session_cipher(session)
        self.published: set[uuid.UUID] = set()
        self.pending_workspaces: set[str] = set()
        self.notified_runs: set[uuid.UUID] = set()
        self._handed: set[str] = set()
        self._held: list[dict[str, Any]] = []
        self._undelivered: list[StoredEvent] = []

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

    def take_undelivered(self) -> list[StoredEvent]:
        undelivered, self._undelivered = self._undelivered, []
        return undelivered

    async def flush(self, audit: Sequence[dict[str, Any]] = (), *, alone: bool = False) -> None:
        """Write `audit` (sealed audit rows, in order), the inserts the session holds (`held`) and
        the held events, in the order they were added: on PostgreSQL one statement for all, on
        SQLite one for each (and one look-up per conversation whose events a webhook or a channel
        binding may hear of).

        `alone`: on PostgreSQL, that statement is the whole transaction, sent on a connection in
        autocommit; if it may not be (an event to deliver), it writes nothing and is sent again in
        a transaction. A held guard that matches no row raises `GuardFailed`, nothing written."""
        if self._postgres:
            await self._flush_postgres(audit, alone)
            return
        if audit:
            await self._session.execute(t.audit_log.insert(), list(audit))
        if not self._held:
            return
        held, self._held = self._held, []
        plain = [_stored(0, row) for row in held]
        rows = [EVENTS.seal(self._cipher, row) for row in held]
        if not await self._any_delivered(plain):
            await self._session.execute(t.events.insert(), rows)
            return
        for row, event in zip(rows, plain, strict=True):  # ids needed: one insert each, in order
            event_id = await self._session.scalar(t.events.insert().returning(t.events.c.id), row)
            if event.type in DELIVERED_EVENT_TYPES and await self._may_deliver(event):
                self._undelivered.append(_stored(int(event_id or 0), event))

    async def _flush_postgres(self, audit: Sequence[dict[str, Any]], alone: bool) -> None:
        if failed_guard(self._session):
            raise GuardFailed()
        tables = take_held(self._session)
        guard = take_guard(self._session)
        if audit:
            tables[t.audit_log] = list(audit)
        if not tables and not self._held:
            if guard is not None and alone:
                await self._session.connection(execution_options=AUTOCOMMIT)
            if (
                guard is not None
                and not (await self._session.execute(guard_statement(guard, False), guard.params)).first()
            ):
                raise GuardFailed()
            return
        inserts: list[str] = []
        params: dict[str, Any] = {}
        for i, (table, rows) in enumerate(tables.items()):
            cte, values = held_params(table, rows, f"held_{i}")
            inserts.append(cte)
            params.update(values)
        if guard is not None:
            params.update(guard.params)
        held, self._held = self._held, []
        plain = [_stored(0, row) for row in held]
        if held:
            params["events"] = encode_rows([dict(r, ord=i) for i, r in enumerate(self._pg_rows(held))])
        gated = guard is not None or (alone and bool(held))
        if alone:  # nothing was sent before: the connection is taken in autocommit
            await self._session.connection(execution_options=AUTOCOMMIT)
        written = await self._write_held(tuple(inserts), bool(held), guard, alone, params)
        if gated and not written and alone and held:
            # Nothing written: an event to deliver, or the guard. The statement goes again, in a
            # transaction this time (the autocommit connection goes back to the pool unused).
            # Without events it was the guard alone: nothing to send again.
            await self._session.rollback()
            written = await self._write_held(tuple(inserts), bool(held), guard, False, params)
        if gated and not written:
            raise GuardFailed()
        if held:
            self._undelivered += [
                _stored(id_, e) for (id_, deliver), e in zip(written, plain, strict=True) if deliver
            ]

    async def _write_held(
        self,
        inserts: tuple[str, ...],
        with_events: bool,
        guard: Guard | None,
        alone: bool,
        params: dict[str, Any],
    ) -> list[Any]:
        if guard is None:
            statement = held_write(inserts, with_events, None, (), alone)
        else:
            statement = held_write(inserts, with_events, guard_statement(guard, True), guard.types, alone)
        if AVAILABLE:  # this write is PostgreSQL's
            return await fetch_rows(self._session, statement, params)
        return list((await self._session.execute(statement, params)).all())

    async def _any_delivered(self, events: Sequence[StoredEvent]) -> bool:
        for event in events:
            if event.type in DELIVERED_EVENT_TYPES and await self._may_deliver(event):
                return True
        return False

    async def _may_deliver(self, event: StoredEvent) -> bool:
        """Whether `event`'s workspace has a webhook or its conversation a binding: cached for the
        transaction (`forget_delivery_targets` drops it)."""
        known: dict[tuple[str, uuid.UUID], bool] = self._session.info.setdefault(DELIVERY_INFO_KEY, {})
        key = (event.workspace, event.conversation_id)
        found = known.get(key)
        if found is None:
            params = {"workspace": event.workspace, "conversation_id": event.conversation_id}
            found = known[key] = bool(await self._session.scalar(_MAY_DELIVER, params))
        return found

    @property
    def _postgres(self) -> bool:
        return self._session.get_bind().dialect.name == "postgresql"

    def handed(self, run_id: uuid.UUID) -> None:
        self._handed.add(str(run_id))

    def _pg_rows(self, held: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for row in held:
            notification = run_notification(row["type"], row["data"])
            if (
                notification is not None
                and notification[0] == WORK_CHANNEL
                and notification[1] in self._handed
            ):
                notification = None  # leased to a slot of this process: no worker is to claim it
            if notification is not None:
                self.notified_runs.add(uuid.UUID(notification[1]))
            pending = row["type"] in PENDING_EVENT_TYPES
            row.update(
                lock_key=_advisory_key(row["conversation_id"]),
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


class SqlWebhookRepository:
    def __init__(self, session: UnitConnection) -> None:
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

    async def subscribed(self, workspace: str, event_type: str) -> list[Webhook]:
        # Few webhooks per workspace: filtering the JSON list here stays portable across dialects.
        hooks = self._subscriptions.get(workspace)
        if hooks is None:
            hooks = self._subscriptions[workspace] = await self.for_workspace(workspace)
        return [w for w in hooks if event_type in w.events]
