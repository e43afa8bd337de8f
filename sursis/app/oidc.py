"""People sign in with the company's OpenID provider: the authorization code flow with PKCE.

Why here and not a key: a person leaves the company the day the provider says so, and belongs to
the groups the provider already knows. The ID token is checked by `joserfc` (signature against the
provider's JWKS, `iss`, `aud`, `exp`, `nonce`), never by hand; the provider's groups are mapped to a
role and a workspace by the provisioning rules (`SURSIS_OIDC_GROUPS` and the rules admins store,
`sursis.domain.people`), read at sign-in and at each refresh; when the ID token names no groups,
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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx
import structlog

from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.errors import Forbidden, Unauthenticated
from sursis.domain.people import (
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
    from joserfc.jwk import KeySet

SESSION_COOKIE = "sursis_session"
STATE_COOKIE = "sursis_sign_in"
CSRF_HEADER = "x-csrf-token"
log = structlog.get_logger(__name__)
ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"]
SIGN_IN_SECONDS = 600.0
KEYS_AGAIN_SECONDS = 60.0
MAX_PENDING_SIGN_INS = 10_000
"""Sign-ins started and not finished kept at once: past it the oldest is forgotten, so a flood of
`/auth/oidc/login` costs bounded storage (the person whose sign-in was dropped starts again)."""
ROLE_RANK = {Role.USER: 0, Role.OPERATOR: 1, Role.ADMIN: 2}


class SignInFailed(Unauthenticated):
    code = "sign_in_failed"


class ProviderUnreachable(SignInFailed):
    """The provider did not answer: new sign-ins fail (503), sessions already open go on."""

    code = "identity_provider_unreachable"
    status = 503


def unreachable(error: Exception) -> ProviderUnreachable:
    log.warning("identity provider unreachable", error=str(error))
    return ProviderUnreachable(f"the identity provider cannot be reached: {error}")


class NotProvisioned(Forbidden):
    code = "not_provisioned"


class CsrfRefused(Forbidden):
    code = "csrf_token_missing"


@dataclass(frozen=True, slots=True)
class OidcConfig:
    """The provider and the client, from the settings (None when sign-in is off)."""

    issuer: str
    client_id: str
    client_secret: str
    redirect_url: str
    scopes: str
    session_seconds: float
    refresh_seconds: float
    groups: Mapping[str, Mapping[str, str]]

    @classmethod
    def from_settings(cls, settings: Settings) -> OidcConfig | None:
        if not settings.oidc_issuer:
            return None
        missing = [
            name
            for name, value in [
                ("SURSIS_OIDC_CLIENT_ID", settings.oidc_client_id),
                ("SURSIS_OIDC_CLIENT_SECRET", settings.oidc_client_secret),
                ("SURSIS_OIDC_REDIRECT_URL", settings.oidc_redirect_url),
            ]
            if not value
        ]
        if missing:
            raise ValueError(f"SURSIS_OIDC_ISSUER is set: set {', '.join(missing)} too")
        assert settings.oidc_client_secret is not None
        return cls(
            issuer=settings.oidc_issuer.rstrip("/"),
            client_id=settings.oidc_client_id or "",
            client_secret=settings.oidc_client_secret.get_secret_value(),
            redirect_url=settings.oidc_redirect_url or "",
            scopes=settings.oidc_scopes,
            session_seconds=settings.oidc_session_seconds,
            refresh_seconds=settings.oidc_refresh_seconds,
            groups=settings.oidc_groups,
        )


def validate_id_token(
    token: str, keys: KeySet, *, issuer: str, client_id: str, nonce: str | None, now: float
) -> dict[str, Any]:
    """The ID token's claims once its signature, issuer, audience, expiry and nonce are right;
    `SignInFailed` otherwise. `nonce` None: a refreshed token, which carries none to compare."""
    from joserfc import jwt
    from joserfc.errors import JoseError

    try:
        decoded = jwt.decode(token, keys, algorithms=ALGORITHMS)
        checks: dict[str, Any] = {
            "iss": {"essential": True, "value": issuer},
            "aud": {"essential": True, "value": client_id},
            "sub": {"essential": True},
            "exp": {"essential": True},
        }
        if nonce is not None:
            checks["nonce"] = {"essential": True, "value": nonce}
        jwt.JWTClaimsRegistry(now=int(now), leeway=30, **checks).validate(decoded.claims)
    except (JoseError, ValueError) as error:
        raise SignInFailed(f"the provider's ID token was refused: {error}") from None
    claims: dict[str, Any] = decoded.claims
    return claims


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


def groups_of(claims: Mapping[str, Any]) -> list[str] | None:
    """The `groups` claim as a list of names; None when the claims carry none."""
    groups = claims.get("groups")
    if groups is None:
        return None
    return [str(g) for g in groups] if isinstance(groups, list) else []


def pkce_pair() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class IdentityProvider:
    """The provider's endpoints and keys (discovered once, keys read again for an unknown `kid`)."""

    def __init__(self, config: OidcConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._transport = transport
        self._metadata: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._keys_read_at = 0.0

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self._transport, timeout=10.0)

    async def metadata(self, *, again: bool = False) -> dict[str, Any]:
        if self._metadata is None or again:
            url = self.config.issuer + "/.well-known/openid-configuration"
            try:
                async with self._client() as client:
                    response = await client.get(url)
                    response.raise_for_status()
                    found = response.json()
            except (httpx.HTTPError, ValueError) as error:
                raise unreachable(error) from None
            if found.get("issuer", "").rstrip("/") != self.config.issuer:
                raise SignInFailed("the provider's discovery document names another issuer")
            self._metadata = found
        return self._metadata

    async def keys(self, *, again: bool = False) -> KeySet:
        """The provider's keys; read again when asked, at most once a minute (a flood of forged
        tokens costs the provider nothing)."""
        from joserfc.jwk import KeySet

        if self._keys is None or (again and time.monotonic() - self._keys_read_at >= KEYS_AGAIN_SECONDS):
            self._keys_read_at = time.monotonic()
            meta = await self.metadata()
            try:
                async with self._client() as client:
                    response = await client.get(meta["jwks_uri"])
                    response.raise_for_status()
                    self._keys = KeySet.import_key_set(response.json())
            except (httpx.HTTPError, ValueError, KeyError) as error:
                raise SignInFailed(f"the provider's keys cannot be read: {error}") from None
        return self._keys

    async def authorization_url(self, state: str, nonce: str, challenge: str) -> str:
        meta = await self.metadata()
        query = {
            "response_type": "code",
            "client_id": self.config.client_id,
            "redirect_uri": self.config.redirect_url,
            "scope": self.config.scopes,
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        return f"{meta['authorization_endpoint']}?{urlencode(query)}"

    async def tokens(self, grant: dict[str, str]) -> dict[str, Any]:
        """The token endpoint's answer to `grant` (client authenticated by its secret, HTTP Basic)."""
        meta = await self.metadata()
        try:
            async with self._client() as client:
                response = await client.post(
                    meta["token_endpoint"],
                    data=grant,
                    auth=(self.config.client_id, self.config.client_secret),
                )
        except httpx.HTTPError as error:
            raise unreachable(error) from None
        if response.status_code != 200:
            raise SignInFailed(f"the provider refused the grant ({response.status_code})")
        answer: dict[str, Any] = response.json()
        if not isinstance(answer.get("id_token"), str):
            raise SignInFailed("the provider's answer has no ID token")
        return answer

    async def claims(self, id_token: str, nonce: str | None, now: float) -> dict[str, Any]:
        issuer, client_id = self.config.issuer, self.config.client_id
        try:
            keys = await self.keys()
            return validate_id_token(id_token, keys, issuer=issuer, client_id=client_id, nonce=nonce, now=now)
        except SignInFailed:
            # The provider may have rotated its keys since they were read: once more, with new ones.
            keys = await self.keys(again=True)
            return validate_id_token(id_token, keys, issuer=issuer, client_id=client_id, nonce=nonce, now=now)

    async def person_claims(self, answer: Mapping[str, Any], nonce: str | None, now: float) -> dict[str, Any]:
        """The claims of the token endpoint's `answer`: its ID token's, checked; when it carries no
        `groups` (providers that keep the ID token small, or answer groups only there), the groups
        of the provider's userinfo answer for the access token, and its email if the token had none."""
        claims = await self.claims(answer["id_token"], nonce, now)
        if groups_of(claims) is None and isinstance(answer.get("access_token"), str):
            info = await self.userinfo(answer["access_token"], str(claims["sub"]))
            for name in ("groups", "email", "preferred_username"):
                if name not in claims and name in info:
                    claims[name] = info[name]
        return claims

    async def userinfo(self, access_token: str, subject: str) -> dict[str, Any]:
        """The provider's userinfo answer for this access token (empty when the provider has no
        userinfo endpoint). An answer about another subject is refused (OpenID Connect Core 5.3.2)."""
        endpoint = (await self.metadata()).get("userinfo_endpoint")
        if not isinstance(endpoint, str):
            return {}
        try:
            async with self._client() as client:
                response = await client.get(endpoint, headers={"Authorization": f"Bearer {access_token}"})
        except httpx.HTTPError as error:
            raise unreachable(error) from None
        if response.status_code != 200:
            raise SignInFailed(f"the provider's userinfo endpoint refused the token ({response.status_code})")
        try:
            info = response.json()
        except ValueError:
            raise SignInFailed("the provider's userinfo answer is not JSON") from None
        if not isinstance(info, dict) or info.get("sub") != subject:
            raise SignInFailed("the provider's userinfo answer is about another person")
        return info


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
