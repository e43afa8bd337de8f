"""People sign in with the company's OpenID provider: the authorization code flow with PKCE.

Why here and not a key: a person leaves the company the day the provider says so, and belongs to
the groups the provider already knows. The ID token is checked by `joserfc` (signature against the
provider's JWKS, `iss`, `aud`, `exp`, `nonce`), never by hand; the provider's groups are mapped to a
role and a workspace by the provisioning rules (`SURSIS_OIDC_GROUPS` and the rules admins store,
`sursis.domain.identity.people`), read at sign-in and at each refresh; when the ID token names no groups,
they are read from the provider's userinfo endpoint.

Sign-ins in progress and sessions are kept in the database by the hash of their `state` and
cookie: any API process serves a session another made, and a restart signs nobody out.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog

from sursis.app.oidc_provider import IdentityProvider, ProviderUnreachable, SignInFailed, groups_of, pkce_pair
from sursis.domain.access import Role
from sursis.domain.errors import Forbidden, Unauthenticated
from sursis.domain.identity.people import (
    PeopleUnitOfWorkFactory,
    PersonSession,
    PersonSessionRepository,
    ProvisioningRule,
    SignIn,
    rules_from_setting,
)
from sursis.domain.records import Principal

if TYPE_CHECKING:
    # joserfc loads `cryptography` (megabytes per process): imported where a token is checked, so
    # a service without people's sign-in never loads it.
    pass

SESSION_COOKIE = "sursis_session"
STATE_COOKIE = "sursis_sign_in"
CSRF_HEADER = "x-csrf-token"
log = structlog.get_logger(__name__)
SIGN_IN_SECONDS = 600.0
MAX_PENDING_SIGN_INS = 10_000
"""Sign-ins started and not finished kept at once: past it the oldest is forgotten, so a flood of
`/auth/oidc/login` costs bounded storage (the person whose sign-in was dropped starts again)."""
ROLE_RANK = {Role.USER: 0, Role.OPERATOR: 1, Role.ADMIN: 2}


class NotProvisioned(Forbidden):
    code = "not_provisioned"


class CsrfRefused(Forbidden):
    code = "csrf_token_missing"


def principal_for(claims: Mapping[str, Any], rules: Mapping[str, ProvisioningRule]) -> Principal:
    """The person's principal: `oidc:<sub>`, named by their email, with the highest role any of
    their groups maps to (and that rule's workspace). `NotProvisioned` when none does."""
    groups = groups_of(claims) or []
    best: ProvisioningRule | None = None
    for group in sorted(groups):
        rule = rules.get(group)
        if rule is not None and (best is None or ROLE_RANK[rule.role] > ROLE_RANK[best.role]):
            best = rule
    if best is None:
        raise NotProvisioned("none of your groups at the identity provider may use this service")
    name = claims.get("email") or claims.get("preferred_username") or claims["sub"]
    person = f"oidc:{claims['sub']}"
    return Principal(
        id=person,
        role=best.role,
        workspace=best.workspace,
        name=str(name),
        person=person,
        groups=frozenset(groups),
    )


RuleSource = Callable[[], Awaitable[Mapping[str, ProvisioningRule]]]
"""The provisioning rules in force, read at each sign-in and refresh (`ProvisioningService.rules`)."""


def hashed(secret: str) -> str:
    """How a session id or a state is kept: SHA-256 of 256 random bits needs no salt."""
    return hashlib.sha256(secret.encode("ascii", "replace")).hexdigest()


def csrf_token_of(session_id: str) -> str:
    """The CSRF token of a session: derived from its id (so never stored), readable only by the
    inbox's script through `GET /auth/oidc/session`, which another site cannot read."""
    digest = hashlib.sha256(b"sursis csrf\0" + session_id.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class PeopleSignIn:
    """Sign-ins in progress (by `state`) and sessions (by their cookie), kept in `sessions` (the
    database: every API process serves every session), by hash only."""

    def __init__(
        self,
        provider: IdentityProvider,
        sessions: PersonSessionRepository,
        rules: RuleSource | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.config = provider.config
        self._sessions = sessions
        self._rules = rules or self._setting_rules
        self._clock = clock

    async def _setting_rules(self) -> Mapping[str, ProvisioningRule]:
        return rules_from_setting(self.config.groups)

    async def start(self) -> tuple[str, str]:
        """The state of a new sign-in and the provider URL to send the browser to."""
        now = self._clock()
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        verifier, challenge = pkce_pair()
        # The discovery document is read at each start: a provider that is down fails the sign-in
        # here, in one line, rather than at the provider's address in the person's browser.
        await self.provider.metadata(again=True)
        url = await self.provider.authorization_url(state, nonce, challenge)
        sign_in = SignIn(nonce, verifier, now + SIGN_IN_SECONDS)
        await self._sessions.add_sign_in(hashed(state), sign_in, keep=MAX_PENDING_SIGN_INS)
        return state, url

    async def finish(self, state: str, code: str, replaces: str | None) -> tuple[str, PersonSession]:
        """The new session (id, session) of a sign-in the provider sent back; the state is spent
        whatever happens, and the session the browser had before, if any, is ended (rotation)."""
        pending = await self._sessions.take_sign_in(hashed(state))
        now = self._clock()
        if pending is None or pending.expires_at <= now:
            raise SignInFailed("this sign-in is unknown, used already or expired: sign in again")
        grant = {"grant_type": "authorization_code", "code": code, "redirect_uri": self.config.redirect_url}
        answer = await self.provider.tokens({**grant, "code_verifier": pending.verifier})
        claims = await self.provider.person_claims(answer, pending.nonce, now)
        principal = principal_for(claims, await self._rules())
        if replaces is not None:
            await self._sessions.remove(hashed(replaces))
        await self._sessions.remove_expired(now)
        session_id = secrets.token_urlsafe(32)
        session = PersonSession(
            principal=principal,
            expires_at=now + self.config.session_seconds,
            refreshed_at=now,
            refresh_token=answer.get("refresh_token"),
            groups=groups_of(claims) or [],
            csrf_token=csrf_token_of(session_id),
        )
        await self._sessions.add(hashed(session_id), session)
        return session_id, session

    async def session(self, session_id: str | None) -> PersonSession:
        """The live session of a cookie, its groups read again when a refresh is due; a person
        the provider (or a rule removed since) no longer puts in a mapped group is signed out
        (`NotProvisioned`)."""
        key = hashed(session_id or "")
        found = await self._sessions.get(key) if session_id else None
        now = self._clock()
        if found is None or found.expires_at <= now:
            if found is not None:
                await self._sessions.remove(key)
            raise Unauthenticated("sign in again: your session has ended")
        found.csrf_token = csrf_token_of(session_id or "")
        if found.refresh_token and now - found.refreshed_at >= self.config.refresh_seconds:
            found = await self._refresh(key, found, now)
        return found

    async def _refresh(self, key: str, found: PersonSession, now: float) -> PersonSession:
        grant = {"grant_type": "refresh_token", "refresh_token": found.refresh_token or ""}
        try:
            answer = await self.provider.tokens(grant)
            claims = await self.provider.person_claims(answer, None, now)
        except ProviderUnreachable:
            return found  # the provider is down: the session lasts until it expires
        except SignInFailed:
            await self._sessions.remove(key)
            raise
        try:
            principal = principal_for(claims, await self._rules())
        except NotProvisioned:
            await self._sessions.remove(key)
            raise
        refreshed = replace(
            found,
            principal=principal,
            refreshed_at=now,
            refresh_token=answer.get("refresh_token") or found.refresh_token,
            groups=groups_of(claims) or [],
        )
        await self._sessions.refreshed(key, refreshed)
        return refreshed

    async def bearer(self, id_token: str) -> Principal:
        """The person an ID token of this client names (`Authorization: Bearer <ID token>`, what
        `sursis login` sends): checked like a sign-in's, without a nonce (none was asked); the
        groups are the token's, so a token lives only as long as the provider made it."""
        claims = await self.provider.claims(id_token, None, self._clock())
        return principal_for(claims, await self._rules())

    async def end(self, session_id: str) -> None:
        await self._sessions.remove(hashed(session_id))


class StoredPersonSessions:
    """`PersonSessionRepository` over the database, each call its own unit of work: a session
    made by one API process is served by every other (one look-up by primary key per request)."""

    def __init__(self, uow: PeopleUnitOfWorkFactory) -> None:
        self._uow = uow

    async def add_sign_in(self, state_hash: str, sign_in: SignIn, *, keep: int) -> None:
        async with self._uow() as uow:
            await uow.person_sessions.add_sign_in(state_hash, sign_in, keep=keep)
            await uow.commit()

    async def take_sign_in(self, state_hash: str) -> SignIn | None:
        async with self._uow() as uow:
            found = await uow.person_sessions.take_sign_in(state_hash)
            await uow.commit()
        return found

    async def add(self, session_hash: str, session: PersonSession) -> None:
        async with self._uow() as uow:
            await uow.person_sessions.add(session_hash, session)
            await uow.commit()

    async def get(self, session_hash: str) -> PersonSession | None:
        async with self._uow.reader() as uow:
            return await uow.person_sessions.get(session_hash)

    async def refreshed(self, session_hash: str, session: PersonSession) -> None:
        async with self._uow() as uow:
            await uow.person_sessions.refreshed(session_hash, session)
            await uow.commit()

    async def remove(self, session_hash: str) -> None:
        async with self._uow() as uow:
            await uow.person_sessions.remove(session_hash)
            await uow.commit()

    async def remove_expired(self, now: float) -> int:
        async with self._uow() as uow:
            removed = await uow.person_sessions.remove_expired(now)
            await uow.commit()
        return removed
