"""Retention in SQL: policies, legal holds, and the purge of conversations with everything that
belongs to them. `PURGE_STEPS` is the one list of what a conversation owns, in delete order
(children first); the orphan test checks it against every table of the schema."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.retention.retention import LegalHold, RetentionPolicy
from sursis.infra.db import approver_tables as ap
from sursis.infra.db import channel_tables as ch
from sursis.infra.db import customer_tables as cu
from sursis.infra.db import retention_tables as r
from sursis.infra.db import review_tables as rv
from sursis.infra.db import tables as t
from sursis.infra.db import world_tables as w
from sursis.infra.db.approval_request_tables import approval_requests
from sursis.infra.db.repositories.base import SqlRepository, rowcount
from sursis.infra.db.sealing import LEGAL_HOLDS

Ids = list[uuid.UUID]


def _bindings(ids: Ids) -> Any:
    return sa.select(ch.channel_bindings.c.id).where(ch.channel_bindings.c.conversation_id.in_(ids))


def _deliveries(ids: Ids) -> Any:
    return sa.select(t.outbox.c.id).where(t.outbox.c.conversation_id.in_(ids))


def _calls(ids: Ids) -> Any:
    return sa.select(t.pending_calls.c.correlation_id).where(t.pending_calls.c.conversation_id.in_(ids))


@dataclass(frozen=True, slots=True)
class PurgeStep:
    """Rows of `table` that belong to the conversations: deleted, or (`unlink`) kept with their
    reference to the conversation set to NULL (rows that outlive it: world rules, persistent
    memories, platform events)."""

    table: sa.Table
    where: Callable[[Ids], Any]
    unlink: tuple[str, ...] = ()


PURGE_STEPS: tuple[PurgeStep, ...] = (
    PurgeStep(t.dead_letters, lambda ids: t.dead_letters.c.outbox_id.in_(_deliveries(ids))),
    PurgeStep(
        ch.slack_posts,
        lambda ids: sa.or_(
            ch.slack_posts.c.binding_id.in_(_bindings(ids)),
            ch.slack_posts.c.delivery_id.in_(_deliveries(ids)),
        ),
    ),
    PurgeStep(
        ch.digest_items,
        lambda ids: sa.or_(
            ch.digest_items.c.conversation_id.in_(ids), ch.digest_items.c.binding_id.in_(_bindings(ids))
        ),
    ),
    PurgeStep(ch.email_digests, lambda ids: ch.email_digests.c.binding_id.in_(_bindings(ids))),
    PurgeStep(t.outbox, lambda ids: t.outbox.c.conversation_id.in_(ids)),
    PurgeStep(ch.channel_bindings, lambda ids: ch.channel_bindings.c.conversation_id.in_(ids)),
    PurgeStep(t.events, lambda ids: t.events.c.conversation_id.in_(ids)),
    PurgeStep(t.tool_calls, lambda ids: t.tool_calls.c.conversation_id.in_(ids)),
    PurgeStep(ap.pending_votes, lambda ids: ap.pending_votes.c.correlation_id.in_(_calls(ids))),
    PurgeStep(ap.pending_routes, lambda ids: ap.pending_routes.c.correlation_id.in_(_calls(ids))),
    PurgeStep(rv.pending_reviews, lambda ids: rv.pending_reviews.c.correlation_id.in_(_calls(ids))),
    PurgeStep(approval_requests, lambda ids: approval_requests.c.correlation_id.in_(_calls(ids))),
    PurgeStep(t.pending_calls, lambda ids: t.pending_calls.c.conversation_id.in_(ids)),
    PurgeStep(cu.delegations, lambda ids: cu.delegations.c.conversation_id.in_(ids)),
    PurgeStep(w.world_sessions, lambda ids: w.world_sessions.c.conversation_id.in_(ids)),
    PurgeStep(
        w.memories,
        lambda ids: sa.and_(w.memories.c.conversation_id.in_(ids), w.memories.c.tier != "persistent"),
    ),
    PurgeStep(
        w.memories,
        lambda ids: sa.and_(w.memories.c.conversation_id.in_(ids), w.memories.c.tier == "persistent"),
        unlink=("conversation_id", "run_id"),
    ),
    PurgeStep(
        cu.platform_events,
        lambda ids: cu.platform_events.c.conversation_id.in_(ids),
        unlink=("conversation_id",),
    ),
    PurgeStep(
        w.world_rules,
        lambda ids: w.world_rules.c.request_conversation_id.in_(ids),
        unlink=("request_conversation_id", "request_tool_call_id"),
    ),
    PurgeStep(t.messages, lambda ids: t.messages.c.conversation_id.in_(ids)),
    PurgeStep(t.runs, lambda ids: t.runs.c.conversation_id.in_(ids)),
    PurgeStep(t.conversations, lambda ids: t.conversations.c.id.in_(ids)),
)


def _step_name(step: PurgeStep) -> str:
    return f"{step.table.name} (unlinked)" if step.unlink else step.table.name


class SqlRetentionRepository(SqlRepository):
    async def policy(self, workspace: str) -> RetentionPolicy | None:
        p = r.retention_policies
        row = (await self._session.execute(sa.select(p).where(p.c.workspace == workspace))).first()
        return RetentionPolicy(**row._mapping) if row else None

    async def policies(self) -> list[RetentionPolicy]:
        p = r.retention_policies
        query = sa.select(p).where(sa.or_(p.c.conversation_days.is_not(None), p.c.audit_days.is_not(None)))
        return [
            RetentionPolicy(**row._mapping)
            for row in await self._session.execute(query.order_by(p.c.workspace))
        ]

    async def set_policy(self, policy: RetentionPolicy) -> None:
        p = r.retention_policies
        values = {
            "workspace": policy.workspace,
            "conversation_days": policy.conversation_days,
            "audit_days": policy.audit_days,
            "updated_by": policy.updated_by,
            "updated_at": policy.updated_at,
        }
        insert = self._insert(p).values(**values)
        await self._session.execute(
            insert.on_conflict_do_update(
                index_elements=[p.c.workspace], set_={k: insert.excluded[k] for k in values}
            )
        )

    async def holds(self, workspace: str | None) -> list[LegalHold]:
        h = r.legal_holds
        query = sa.select(h).order_by(h.c.created_at, h.c.id)
        if workspace is not None:
            query = query.where(h.c.workspace == workspace)
        return [self._hold(row) for row in await self._session.execute(query)]

    def _hold(self, row: Any) -> LegalHold:
        return LegalHold(**LEGAL_HOLDS.open(self._cipher, row))

    async def add_hold(self, hold: LegalHold) -> None:
        values = {
            "id": hold.id,
            "workspace": hold.workspace,
            "conversation_id": hold.conversation_id,
            "reason": hold.reason,
            "created_by": hold.created_by,
            "created_at": hold.created_at,
        }
        await self._session.execute(r.legal_holds.insert().values(**LEGAL_HOLDS.seal(self._cipher, values)))

    async def release_hold(self, hold_id: uuid.UUID) -> LegalHold | None:
        h = r.legal_holds
        row = (await self._session.execute(h.delete().where(h.c.id == hold_id).returning(h))).first()
        return self._hold(row) if row else None

    async def idle_conversations(self, workspace: str, before: datetime, limit: int | None) -> Ids:
        c, h = t.conversations.c, r.legal_holds.c
        held = sa.exists().where(
            h.workspace == workspace, sa.or_(h.conversation_id.is_(None), h.conversation_id == c.id)
        )
        query = (
            sa.select(c.id)
            .where(c.workspace == workspace, c.updated_at < before, c.active_run_id.is_(None), ~held)
            .order_by(c.updated_at, c.id)
            .limit(limit)
        )
        if self._postgres and limit is not None:
            query = query.with_for_update(of=t.conversations, skip_locked=True)
        return list(await self._session.scalars(query))

    async def count(self, conversation_ids: Ids) -> dict[str, int]:
        counts: dict[str, int] = {}
        for step in PURGE_STEPS:
            query = sa.select(sa.func.count()).select_from(step.table).where(step.where(conversation_ids))
            counts[_step_name(step)] = int(await self._session.scalar(query) or 0)
        return counts

    async def purge(self, workspace: str, conversation_ids: Ids, now: datetime) -> dict[str, int]:
        counts: dict[str, int] = {}
        for step in PURGE_STEPS:
            where = step.where(conversation_ids)
            statement: sa.Update | sa.Delete
            if step.unlink:
                statement = step.table.update().where(where).values(**dict.fromkeys(step.unlink))
            else:
                statement = step.table.delete().where(where)
            counts[_step_name(step)] = rowcount(await self._session.execute(statement))
        await self._session.execute(
            r.purged_conversations.insert(),
            [{"id": i, "workspace": workspace, "purged_at": now} for i in conversation_ids],
        )
        return counts
