"""API keys: made once, shown once, stored as a hash, resolved to a `Principal` on every request."""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from sursis.domain.access import Permission, Role
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import NotFound, Unauthenticated, ValidationFailed
from sursis.domain.identity.credential_cache import CredentialCache
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records import AuditEntry, Principal
from sursis.domain.records.access_records import ApiKey

KEY_PREFIX = "srs_"
"""Every key starts with this, so a leaked key is recognisable (secret scanners, logs)."""
DISPLAY_PREFIX_CHARS = 12
MAX_KEY_CHARS = 200
WORKSPACE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
PERSON = re.compile(r"^oidc:[\x21-\x7e]{1,255}$")
NO_WORKSPACE = "*"
"""The audit `workspace` of keys that have none (admin keys made without one)."""


def new_secret() -> str:
    """256 random bits behind a recognisable prefix."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(secret: str) -> str:
    """SHA-256 is enough here: the secret is 256 random bits, not a password, so no salt or KDF."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A new key: `secret` exists only in this object and is never stored."""

    key: ApiKey
    secret: str


def _field_error(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(message, extra={"errors": [{"loc": [field], "msg": message}]})


class KeyService:
    """Key management (admins and the command line) and authentication (every `/v1` request)."""

    def __init__(
        self, uow: UnitOfWorkFactory, *, clock: Clock = utcnow, cache: CredentialCache | None = None
    ) -> None:
        self._uow = uow
        self._clock = clock
        self._cache = cache

    async def authenticate(self, secret: str) -> Principal:
        """The principal of a valid, unrevoked key; `Unauthenticated` for anything else.
        Only valid keys are cached: a refused key is looked up (and refused) every time."""
        if not secret.startswith(KEY_PREFIX) or len(secret) > MAX_KEY_CHARS:
            raise Unauthenticated("the API key is not valid")
        key_hash = hash_key(secret)
        if self._cache is not None and (cached := self._cache.get(key_hash, self._clock())) is not None:
            return cached
        ticket = self._cache.ticket() if self._cache is not None else 0
        async with self._uow.reader() as uow:
            key = await uow.api_keys.by_hash(key_hash)
        if key is None or not key.is_valid(self._clock()):
            raise Unauthenticated("the API key is not valid or was revoked")
        principal = key.principal()
        if self._cache is not None:
            self._cache.put(key_hash, principal, ticket, expires_at=key.expires_at)
        return principal

    async def create(
        self,
        principal: Principal,
        *,
        role: Role | str,
        workspace: str | None,
        name: str | None = None,
        expires_at: datetime | None = None,
    ) -> IssuedKey:
        principal.require(Permission.MANAGE_KEYS)
        try:
            role = Role(role)
        except ValueError:
            raise _field_error("role", f"role must be one of {', '.join(r.value for r in Role)}") from None
        if workspace is None and role is not Role.ADMIN:
            raise _field_error("workspace", f"a {role.value} key needs a workspace")
        if workspace is not None and not WORKSPACE.match(workspace):
            raise _field_error("workspace", "1-100 characters of letters, digits, '_', '.' or '-'")
        name = (name or "").strip() or f"{role.value}@{workspace or 'all'}"
        if len(name) > 200:
            raise _field_error("name", "at most 200 characters")
        now = self._clock()
        if expires_at is not None and (expires_at.tzinfo is None or expires_at <= now):
            raise _field_error("expires_at", "a moment in the future, with its time zone")
        secret = new_secret()
        key = ApiKey(
            id=uuid.uuid4(),
            name=name,
            prefix=secret[:DISPLAY_PREFIX_CHARS],
            key_hash=hash_key(secret),
            role=role,
            workspace=workspace,
            created_at=now,
            expires_at=expires_at,
        )
        async with self._uow() as uow:
            await uow.api_keys.add(key)
            await uow.audit.append(self._audit("key.created", principal.id, key), now)
            await uow.commit()
        return IssuedKey(key=key, secret=secret)

    async def list_keys(self, principal: Principal, *, include_revoked: bool = False) -> list[ApiKey]:
        principal.require(Permission.MANAGE_KEYS)
        async with self._uow.reader() as uow:
            return await uow.api_keys.search(include_revoked=include_revoked)

    async def revoke(self, principal: Principal, key_id: uuid.UUID) -> ApiKey:
        """Revoke a key; revoking a revoked key changes nothing (idempotent)."""
        principal.require(Permission.MANAGE_KEYS)
        now = self._clock()
        async with self._uow() as uow:
            key = await uow.api_keys.get(key_id)
            if key is None:
                raise NotFound("key not found")
            if await uow.api_keys.revoke(key_id, now):
                await uow.audit.append(self._audit("key.revoked", principal.id, key), now)
                await uow.commit()
                key.revoked_at = now
        # Other processes hear of it from the commit (the repository's notification); this one
        # at once. Forgotten even when it was already revoked: whatever this process holds goes.
        if self._cache is not None:
            self._cache.forget({str(key_id)})
        return key

    async def link_person(self, principal: Principal, key_id: uuid.UUID, person: str | None) -> ApiKey:
        """Link a key to a person (`oidc:<subject>`; None unlinks): from then on it approves as that
        person, one approver with their sign-in and their other keys. Audited; admins only."""
        principal.require(Permission.MANAGE_KEYS)
        if person is not None and not PERSON.match(person):
            raise _field_error("person", "`oidc:` and the provider's subject (1-255 visible characters)")
        now = self._clock()
        async with self._uow() as uow:
            key = await uow.api_keys.get(key_id)
            if key is None:
                raise NotFound("key not found")
            await uow.api_keys.link_person(key_id, person)
            entry = self._audit("key.linked" if person else "key.unlinked", principal.id, key)
            entry.details["person"] = person
            entry.details["was"] = key.person
            await uow.audit.append(entry, now)
            await uow.commit()
        if self._cache is not None:
            self._cache.forget({str(key_id)})
        key.person = person
        return key

    async def create_first_admin(self, principal: Principal) -> IssuedKey | None:
        """An admin key when there are no keys at all (first start); None otherwise."""
        async with self._uow() as uow:
            if await uow.api_keys.count() > 0:
                return None
        return await self.create(principal, role=Role.ADMIN, workspace=None, name="first admin")

    @staticmethod
    def _audit(action: str, actor: str, key: ApiKey) -> AuditEntry:
        return AuditEntry(
            action=action,
            actor=actor,
            workspace=key.workspace or NO_WORKSPACE,
            details={"key_id": str(key.id), "name": key.name, "role": key.role.value, "prefix": key.prefix},
        )
