"""SQL repositories of API keys and pre-approvals. They never commit: the unit of work does."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.access import Role
from sursis.domain.approvals.decision_seal import pre_approval_facts
from sursis.domain.records.access_records import ApiKey, Authorization
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.base import SqlRepository
from sursis.infra.db.rows import row_values
from sursis.infra.db.sealing import AUTHORIZATIONS
from sursis.infra.db.unit_connection import UnitConnection
from sursis.infra.encryption.decision_seal import sealer_of

KEY_CHANNEL = "sursis_keys"
"""`NOTIFY sursis_keys, '<key id>'` is sent in the transaction that changes a key (delivered on
commit): every API process drops the key from its credential cache (`CredentialCache`)."""


def _key_from_row(row: Any) -> ApiKey:
    m = dict(row._mapping)
    m["role"] = Role(m["role"])
    return ApiKey(**m)


class SqlApiKeyRepository:
    def __init__(self, session: UnitConnection) -> None:
        self._session = session

    async def add(self, key: ApiKey) -> None:
        await self._session.execute(t.api_keys.insert().values(row_values(key, t.api_keys)))

    async def get(self, key_id: uuid.UUID) -> ApiKey | None:
        row = (await self._session.execute(sa.select(t.api_keys).where(t.api_keys.c.id == key_id))).first()
        return _key_from_row(row) if row else None

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        row = (
            await self._session.execute(sa.select(t.api_keys).where(t.api_keys.c.key_hash == key_hash))
        ).first()
        return _key_from_row(row) if row else None

    async def names(self, key_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        if not key_ids:
            return {}
        c = t.api_keys.c
        rows = await self._session.execute(sa.select(c.id, c.name).where(c.id.in_(list(set(key_ids)))))
        return {row.id: row.name for row in rows}

    async def search(self, *, include_revoked: bool) -> list[ApiKey]:
        c = t.api_keys.c
        query = sa.select(t.api_keys)
        if not include_revoked:
            query = query.where(c.revoked_at.is_(None))
        rows = await self._session.execute(query.order_by(c.created_at, c.id))
        return [_key_from_row(row) for row in rows]

    async def count(self) -> int:
        return int(
            (await self._session.execute(sa.select(sa.func.count()).select_from(t.api_keys))).scalar_one()
        )

    async def revoke(self, key_id: uuid.UUID, now: datetime) -> bool:
        c = t.api_keys.c
        result = await self._session.execute(
            t.api_keys.update().where(c.id == key_id, c.revoked_at.is_(None)).values(revoked_at=now)
        )
        revoked = int(getattr(result, "rowcount", 0)) == 1
        if revoked:
            await self._notify(key_id)
        return revoked

    async def link_person(self, key_id: uuid.UUID, person: str | None) -> None:
        await self._session.execute(
            t.api_keys.update().where(t.api_keys.c.id == key_id).values(person=person)
        )
        await self._notify(key_id)

    async def _notify(self, key_id: uuid.UUID) -> None:
        if self._session.get_bind().dialect.name == "postgresql":
            await self._session.execute(sa.select(sa.func.pg_notify(KEY_CHANNEL, str(key_id))))


AUTHORIZATION_CHANNEL = "sursis_authorizations"
"""`NOTIFY sursis_authorizations, '<workspace>'` is sent in the transaction that creates or revokes
a pre-approval (delivered on commit): every worker drops the workspace from its policy cache."""


class SqlAuthorizationRepository(SqlRepository):
    """Pre-approvals; their `reason` and `args_match` are sealed like other content, so a match is
    made on the opened values (`candidates` filters on plaintext workspace, tool and times only)."""

    async def add(self, authorization: Authorization) -> None:
        values = row_values(authorization, t.authorizations)
        values["seal"] = sealer_of(self._cipher).seal(pre_approval_facts(authorization))
        sealed = AUTHORIZATIONS.seal(self._cipher, values)
        await self._session.execute(t.authorizations.insert().values(sealed))
        await self._notify(authorization.workspace)

    async def get(self, authorization_id: uuid.UUID) -> Authorization | None:
        row = (
            await self._session.execute(
                sa.select(t.authorizations).where(t.authorizations.c.id == authorization_id)
            )
        ).first()
        return self._record(row) if row else None

    async def search(
        self, *, workspace: str | None, include_inactive: bool, now: datetime
    ) -> list[Authorization]:
        c = t.authorizations.c
        query = sa.select(t.authorizations)
        if workspace is not None:
            query = query.where(c.workspace == workspace)
        if not include_inactive:
            query = query.where(*_active(now))
        rows = await self._session.execute(query.order_by(c.created_at, c.id))
        return [self._record(row) for row in rows]

    async def candidates(self, workspace: str, tool_name: str, now: datetime) -> list[Authorization]:
        params = {"workspace": workspace, "tool_name": tool_name, "now": now}
        rows = await self._session.execute(_CANDIDATES, params)
        return [self._record(row) for row in rows]

    async def unsealed(self) -> list[Authorization]:
        c = t.authorizations.c
        query = sa.select(t.authorizations).where(c.seal.is_(None), c.revoked_at.is_(None))
        rows = await self._session.execute(query.order_by(c.created_at, c.id))
        return [self._record(row) for row in rows]

    async def seal_stored(self, authorization: Authorization) -> bool:
        c = t.authorizations.c
        seal = sealer_of(self._cipher).seal(pre_approval_facts(authorization))
        result = await self._session.execute(
            t.authorizations.update().where(c.id == authorization.id, c.seal.is_(None)).values(seal=seal)
        )
        await self._notify(authorization.workspace)
        return int(getattr(result, "rowcount", 0)) == 1

    def _record(self, row: Any) -> Authorization:
        """The pre-approval as stored; where decisions are sealed, with why its seal does not
        check (`seal_problem`): the policy then lets it lift nothing."""
        authorization = Authorization(**AUTHORIZATIONS.open(self._cipher, row))
        sealer = sealer_of(self._cipher)
        if sealer.enabled:
            facts = pre_approval_facts(authorization)
            authorization.seal_problem = sealer.problem(facts, authorization.seal, "pre-approval")
        return authorization

    async def revoke(self, authorization_id: uuid.UUID, now: datetime) -> bool:
        c = t.authorizations.c
        result = await self._session.execute(
            t.authorizations.update()
            .where(c.id == authorization_id, c.revoked_at.is_(None))
            .values(revoked_at=now)
            .returning(c.workspace)
        )
        workspace = result.scalar_one_or_none()
        if workspace is not None:
            await self._notify(workspace)
        return workspace is not None

    async def _notify(self, workspace: str) -> None:
        if self._session.get_bind().dialect.name == "postgresql":
            await self._session.execute(sa.select(sa.func.pg_notify(AUTHORIZATION_CHANNEL, workspace)))


def _active(now: Any) -> tuple[Any, ...]:
    c = t.authorizations.c
    return (c.revoked_at.is_(None), sa.or_(c.expires_at.is_(None), c.expires_at > now))


def _candidates() -> Any:
    c = t.authorizations.c
    return (
        sa.select(t.authorizations)
        .where(
            c.workspace == sa.bindparam("workspace"),
            c.tool_name == sa.bindparam("tool_name"),
            *_active(sa.bindparam("now")),
        )
        .order_by(c.created_at, c.id)
    )


_CANDIDATES = _candidates()
"""Checked before every gated call: built once, with bound parameters."""
