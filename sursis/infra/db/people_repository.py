"""SQL repositories of people's sign-in: provisioning rules, sign-ins in progress, sessions. They
never commit: the unit of work does."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from sursis.domain.access import Role
from sursis.domain.identity.people import PersonSession, ProvisioningRule, SignIn
from sursis.domain.records import Principal
from sursis.infra.db import people_tables as p
from sursis.infra.db.repositories.base import SqlRepository, rowcount
from sursis.infra.db.sealing import PERSON_SESSIONS

RULES = p.oidc_provisioning_rules
SIGN_INS = p.person_sign_ins
SESSIONS = p.person_sessions
NAME_CHARS = 300
"""A person's name is the provider's (their email): kept to the column's width, not refused."""


def _rule(row: Any) -> ProvisioningRule:
    return ProvisioningRule(
        row.provider_group, Role(row.role), row.workspace, "stored", row.updated_by, row.updated_at
    )


class SqlProvisioningRuleRepository(SqlRepository):
    async def rules(self) -> list[ProvisioningRule]:
        rows = await self._session.execute(sa.select(RULES).order_by(RULES.c.provider_group))
        return [_rule(row) for row in rows]

    async def get(self, group: str) -> ProvisioningRule | None:
        row = (await self._session.execute(sa.select(RULES).where(RULES.c.provider_group == group))).first()
        return _rule(row) if row else None

    async def put(self, rule: ProvisioningRule) -> None:
        values = {
            "provider_group": rule.group,
            "role": rule.role.value,
            "workspace": rule.workspace,
            "updated_by": rule.updated_by or "",
            "updated_at": rule.updated_at,
        }
        insert = self._insert(RULES).values(values)
        changed = {k: v for k, v in values.items() if k != "provider_group"}
        await self._session.execute(
            insert.on_conflict_do_update(index_elements=["provider_group"], set_=changed)
        )

    async def remove(self, group: str) -> ProvisioningRule | None:
        found = await self.get(group)
        if found is not None:
            await self._session.execute(RULES.delete().where(RULES.c.provider_group == group))
        return found


class SqlPersonSessionRepository(SqlRepository):
    async def add_sign_in(self, state_hash: str, sign_in: SignIn, *, keep: int) -> None:
        count = int(
            (await self._session.execute(sa.select(sa.func.count()).select_from(SIGN_INS))).scalar_one()
        )
        if count >= keep:
            oldest = sa.select(SIGN_INS.c.state_hash).order_by(SIGN_INS.c.expires_at).limit(count - keep + 1)
            await self._session.execute(
                SIGN_INS.delete().where(SIGN_INS.c.state_hash.in_(oldest.scalar_subquery()))
            )
        values = {
            "state_hash": state_hash,
            "nonce": sign_in.nonce,
            "verifier": sign_in.verifier,
            "expires_at": sign_in.expires_at,
        }
        await self._session.execute(SIGN_INS.insert().values(values))

    async def take_sign_in(self, state_hash: str) -> SignIn | None:
        row = (
            await self._session.execute(
                SIGN_INS.delete()
                .where(SIGN_INS.c.state_hash == state_hash)
                .returning(SIGN_INS.c.nonce, SIGN_INS.c.verifier, SIGN_INS.c.expires_at)
            )
        ).first()
        return SignIn(row.nonce, row.verifier, row.expires_at) if row else None

    async def add(self, session_hash: str, session: PersonSession) -> None:
        values = {"id_hash": session_hash, **self._values(session)}
        await self._session.execute(SESSIONS.insert().values(PERSON_SESSIONS.seal(self._cipher, values)))

    async def get(self, session_hash: str) -> PersonSession | None:
        row = (
            await self._session.execute(sa.select(SESSIONS).where(SESSIONS.c.id_hash == session_hash))
        ).first()
        if row is None:
            return None
        m = PERSON_SESSIONS.open(self._cipher, row)
        principal = Principal(
            id=m["person"],
            role=Role(m["role"]),
            workspace=m["workspace"],
            name=m["name"],
            person=m["person"],
            groups=frozenset(m["groups"]),
        )
        return PersonSession(
            principal, m["expires_at"], m["refreshed_at"], m["refresh_token"], list(m["groups"])
        )

    async def refreshed(self, session_hash: str, session: PersonSession) -> None:
        values = PERSON_SESSIONS.seal(self._cipher, self._values(session), {"id_hash": session_hash})
        await self._session.execute(
            SESSIONS.update().where(SESSIONS.c.id_hash == session_hash).values(values)
        )

    async def remove(self, session_hash: str) -> None:
        await self._session.execute(SESSIONS.delete().where(SESSIONS.c.id_hash == session_hash))

    async def remove_expired(self, now: float) -> int:
        sessions = await self._session.execute(SESSIONS.delete().where(SESSIONS.c.expires_at <= now))
        sign_ins = await self._session.execute(SIGN_INS.delete().where(SIGN_INS.c.expires_at <= now))
        return rowcount(sessions) + rowcount(sign_ins)

    @staticmethod
    def _values(session: PersonSession) -> dict[str, Any]:
        principal = session.principal
        return {
            "person": principal.id,
            "name": None if principal.name is None else principal.name[:NAME_CHARS],
            "role": principal.role.value,
            "workspace": principal.workspace,
            "groups": list(session.groups),
            "refresh_token": session.refresh_token,
            "expires_at": session.expires_at,
            "refreshed_at": session.refreshed_at,
        }
