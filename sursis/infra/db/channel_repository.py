"""SQL for the channels context: bindings, Slack identities, events and posts, email digests.
Like every repository, it never commits."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.encryption import Cipher
from sursis.domain.records.channel_records import (
    BindingKind,
    ChannelBinding,
    Digest,
    DigestEnd,
    DigestItem,
    DigestItemKind,
    SlackAddress,
    SlackIdentity,
    SlackPost,
)
from sursis.infra.db import channel_tables as ch
from sursis.infra.db.event_repositories import forget_delivery_targets
from sursis.infra.db.repositories.base import SqlRepository, rowcount
from sursis.infra.db.sealing import DIGEST_ITEMS

PENDING, SENDING = "pending", "sending"


def _binding_values(binding: ChannelBinding) -> dict[str, Any]:
    slack = binding.slack
    return {
        "id": binding.id,
        "workspace": binding.workspace,
        "conversation_id": binding.conversation_id,
        "kind": binding.kind.value,
        "slack_team_id": slack.team_id if slack else None,
        "slack_channel_id": slack.channel_id if slack else None,
        "slack_thread_ts": slack.thread_ts if slack else None,
        "email": binding.email,
        "created_by": binding.created_by,
        "created_at": binding.created_at,
    }


def _binding(row: Any) -> ChannelBinding:
    m = row._mapping
    slack = (
        SlackAddress(m["slack_team_id"], m["slack_channel_id"], m["slack_thread_ts"])
        if m["slack_team_id"] is not None and m["slack_channel_id"] is not None
        else None
    )
    return ChannelBinding(
        id=m["id"],
        workspace=m["workspace"],
        conversation_id=m["conversation_id"],
        kind=BindingKind(m["kind"]),
        created_by=m["created_by"],
        created_at=m["created_at"],
        slack=slack,
        email=m["email"],
    )


def _identity(row: Any) -> SlackIdentity:
    m = row._mapping
    return SlackIdentity(m["team_id"], m["user_id"], m["key_id"], m["created_by"], m["created_at"])


def _item(row: Any, cipher: Cipher) -> DigestItem:
    m = DIGEST_ITEMS.open(cipher, row)
    return DigestItem(
        binding_id=m["binding_id"],
        conversation_id=m["conversation_id"],
        kind=DigestItemKind(m["kind"]),
        summary=m["summary"],
        created_at=m["created_at"],
        data=m["data"],
        id=m["id"],
    )


def _bindings_for() -> Any:
    b = ch.channel_bindings.c
    return (
        sa.select(ch.channel_bindings)
        .where(
            b.workspace == sa.bindparam("workspace"),
            b.kind.in_([k.value for k in BindingKind]),
            sa.or_(b.conversation_id == sa.bindparam("conversation_id"), b.conversation_id.is_(None)),
        )
        .order_by(b.created_at, b.id)
    )


_BINDINGS_FOR = _bindings_for()
"""Read by every transaction that publishes an event a channel may carry: built once."""


class SqlChannelRepository(SqlRepository):
    async def add_binding(self, binding: ChannelBinding) -> None:
        forget_delivery_targets(self._session)
        await self._session.execute(ch.channel_bindings.insert().values(_binding_values(binding)))

    async def get_binding(self, binding_id: uuid.UUID) -> ChannelBinding | None:
        row = (
            await self._session.execute(
                sa.select(ch.channel_bindings).where(
                    ch.channel_bindings.c.id == binding_id,
                    ch.channel_bindings.c.kind.in_([k.value for k in BindingKind]),
                )
            )
        ).first()
        return _binding(row) if row else None

    async def delete_binding(self, binding_id: uuid.UUID) -> bool:
        forget_delivery_targets(self._session)
        b = ch.channel_bindings.c
        await self._session.execute(
            ch.digest_items.delete().where(
                ch.digest_items.c.binding_id == binding_id, ch.digest_items.c.digest_id.is_(None)
            )
        )
        # Its history (posts, digests) keeps pointing at the row; the row is detached from its
        # conversation and its thread, so a new message in that thread starts a new conversation.
        result = await self._session.execute(
            ch.channel_bindings.update()
            .where(b.id == binding_id, b.kind != "deleted")
            .values(
                kind="deleted",
                conversation_id=None,
                slack_team_id=None,
                slack_channel_id=None,
                slack_thread_ts=None,
            )
        )
        return rowcount(result) > 0

    async def slack_binding(self, address: SlackAddress) -> ChannelBinding | None:
        b = ch.channel_bindings.c
        row = (
            await self._session.execute(
                sa.select(ch.channel_bindings).where(
                    b.slack_team_id == address.team_id,
                    b.slack_channel_id == address.channel_id,
                    b.slack_thread_ts == address.thread_ts,
                    b.kind == BindingKind.SLACK.value,
                )
            )
        ).first()
        return _binding(row) if row else None

    async def bindings_for(self, conversation_id: uuid.UUID, workspace: str) -> list[ChannelBinding]:
        params = {"workspace": workspace, "conversation_id": conversation_id}
        rows = await self._session.execute(_BINDINGS_FOR, params)
        return [_binding(row) for row in rows]

    async def start_thread(self, binding_id: uuid.UUID, thread_ts: str) -> None:
        b = ch.channel_bindings.c
        await self._session.execute(
            ch.channel_bindings.update()
            .where(b.id == binding_id, b.slack_thread_ts.is_(None))
            .values(slack_thread_ts=thread_ts)
        )

    async def list_bindings(
        self, workspace: str | None, conversation_id: uuid.UUID | None
    ) -> list[ChannelBinding]:
        b = ch.channel_bindings.c
        query = sa.select(ch.channel_bindings).where(b.kind.in_([k.value for k in BindingKind]))
        if workspace is not None:
            query = query.where(b.workspace == workspace)
        if conversation_id is not None:
            query = query.where(b.conversation_id == conversation_id)
        rows = await self._session.execute(query.order_by(b.created_at, b.id).limit(500))
        return [_binding(row) for row in rows]

    async def map_slack_user(self, identity: SlackIdentity) -> None:
        u = ch.slack_users.c
        await self._session.execute(
            ch.slack_users.delete().where(u.team_id == identity.team_id, u.user_id == identity.user_id)
        )
        await self._session.execute(
            ch.slack_users.insert().values(
                team_id=identity.team_id,
                user_id=identity.user_id,
                key_id=identity.key_id,
                created_by=identity.created_by,
                created_at=identity.created_at,
            )
        )

    async def slack_identity(self, team_id: str, user_id: str) -> SlackIdentity | None:
        u = ch.slack_users.c
        row = (
            await self._session.execute(
                sa.select(ch.slack_users).where(u.team_id == team_id, u.user_id == user_id)
            )
        ).first()
        return _identity(row) if row else None

    async def list_slack_users(self) -> list[SlackIdentity]:
        u = ch.slack_users.c
        rows = await self._session.execute(sa.select(ch.slack_users).order_by(u.team_id, u.user_id))
        return [_identity(row) for row in rows]

    async def delete_slack_user(self, team_id: str, user_id: str) -> bool:
        u = ch.slack_users.c
        result = await self._session.execute(
            ch.slack_users.delete().where(u.team_id == team_id, u.user_id == user_id)
        )
        return rowcount(result) > 0

    async def remember_slack_event(self, event_id: str, now: datetime) -> bool:
        result = await self._session.execute(
            self._insert(ch.slack_events)
            .values(event_id=event_id, received_at=now)
            .on_conflict_do_nothing(index_elements=["event_id"])
        )
        return rowcount(result) == 1

    async def record_slack_post(self, delivery_id: int, post: SlackPost, now: datetime) -> None:
        await self._session.execute(
            ch.slack_posts.insert().values(
                delivery_id=delivery_id,
                binding_id=post.binding_id,
                channel_id=post.channel_id,
                ts=post.ts,
                correlation_id=post.correlation_id,
                posted_at=now,
            )
        )

    async def slack_post_ts(self, delivery_id: int) -> str | None:
        value = await self._session.scalar(
            sa.select(ch.slack_posts.c.ts).where(ch.slack_posts.c.delivery_id == delivery_id)
        )
        return None if value is None else str(value)

    async def approval_posts(self, correlation_id: uuid.UUID, binding_id: uuid.UUID) -> list[tuple[str, str]]:
        p = ch.slack_posts.c
        rows = await self._session.execute(
            sa.select(p.channel_id, p.ts)
            .where(p.correlation_id == correlation_id, p.binding_id == binding_id)
            .order_by(p.delivery_id)
        )
        return [(row.channel_id, row.ts) for row in rows]

    async def add_digest_items(self, items: Sequence[DigestItem]) -> None:
        if not items:
            return
        await self._session.execute(
            ch.digest_items.insert(),
            [
                DIGEST_ITEMS.seal(
                    self._cipher,
                    {
                        "binding_id": item.binding_id,
                        "conversation_id": item.conversation_id,
                        "kind": item.kind.value,
                        "summary": item.summary,
                        "data": item.data,
                        "created_at": item.created_at,
                        "digest_id": None,
                    },
                )
                for item in items
            ],
        )

    async def open_digests(self, window_end: datetime, now: datetime) -> int:
        i = ch.digest_items.c
        waiting = await self._session.scalars(
            sa.select(i.binding_id)
            .where(i.digest_id.is_(None), i.created_at < window_end)
            .group_by(i.binding_id)
        )
        opened = 0
        for binding_id in list(waiting):
            digest_id = uuid.uuid4()
            inserted = await self._session.execute(
                self._insert(ch.email_digests)
                .values(
                    id=digest_id,
                    binding_id=binding_id,
                    window_end=window_end,
                    status=PENDING,
                    attempts=0,
                    created_at=now,
                    next_attempt_at=now,
                )
                .on_conflict_do_nothing(index_elements=["binding_id", "window_end"])
            )
            if rowcount(inserted) != 1:
                continue  # this window's digest of the binding exists: another process opened it
            await self._session.execute(
                ch.digest_items.update()
                .where(i.binding_id == binding_id, i.digest_id.is_(None), i.created_at < window_end)
                .values(digest_id=digest_id)
            )
            opened += 1
        return opened

    async def claim_digests(self, now: datetime, claimed_until: datetime, limit: int) -> list[Digest]:
        d = ch.email_digests.c
        due = (
            sa.select(d.id)
            .where(d.status == PENDING, d.next_attempt_at <= now)
            .order_by(d.created_at, d.id)
            .limit(limit)
        )
        if self._session.get_bind().dialect.name == "postgresql":
            due = due.with_for_update(skip_locked=True)
        claimed = await self._session.execute(
            ch.email_digests.update()
            .where(d.id.in_(due.scalar_subquery()), d.status == PENDING)
            .values(status=SENDING, attempts=d.attempts + 1, claimed_until=claimed_until)
            .returning(d.id, d.binding_id, d.window_end, d.attempts)
        )
        digests: list[Digest] = []
        for row in list(claimed):
            binding = await self.get_binding(row.binding_id)
            items = await self._session.execute(
                sa.select(ch.digest_items)
                .where(ch.digest_items.c.digest_id == row.id)
                .order_by(ch.digest_items.c.id)
            )
            if binding is None:
                continue
            digests.append(
                Digest(
                    row.id,
                    binding,
                    row.window_end,
                    row.attempts,
                    tuple(_item(r, self._cipher) for r in items),
                )
            )
        return digests

    async def listed_earlier(
        self, binding_id: uuid.UUID, kind: DigestItemKind, digest_id: uuid.UUID, limit: int
    ) -> list[DigestItem]:
        i = ch.digest_items.c
        rows = await self._session.execute(
            sa.select(ch.digest_items)
            .where(
                i.binding_id == binding_id,
                i.kind == kind.value,
                i.digest_id.is_not(None),
                i.digest_id != digest_id,
            )
            .order_by(i.id.desc())
            .limit(limit)
        )
        return [_item(row, self._cipher) for row in rows]

    async def finish_digest(self, digest_id: uuid.UUID, end: DigestEnd, now: datetime) -> None:
        values: dict[str, Any] = {
            "status": end.status,
            "last_error": end.error,
            "next_attempt_at": end.retry_at,
        }
        if end.status == "sent":
            values["sent_at"] = now
        await self._session.execute(
            ch.email_digests.update().where(ch.email_digests.c.id == digest_id).values(**values)
        )

    async def abandon_stale_digests(self, now: datetime) -> int:
        d = ch.email_digests.c
        result = await self._session.execute(
            ch.email_digests.update()
            .where(d.status == SENDING, d.claimed_until < now)
            .values(status="unknown", last_error="the sending process stopped mid-send; not sent again")
        )
        return rowcount(result)
