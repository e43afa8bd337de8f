"""People sign in with the company's OpenID provider: the authorization code flow with PKCE.

Why here and not a key: a person leaves the company the day the provider says so, and belongs to
the groups the provider already knows. The ID token is checked by `joserfc` (signature against the
provider's JWKS, `iss`, `aud`, `exp`, `nonce`), never by hand; the provider's groups are mapped to a
role and a workspace by the rules in `SURSIS_OIDC_GROUPS`, at sign-in and at each refresh.

Sign-ins in progress and sessions live in this process's memory: one API process serves the inbox
(docs/security.md says so); a restart signs everyone out.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx
import structlog

from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.errors import Forbidden, Unauthenticated
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
`/auth/oidc/login` costs bounded memory (the person whose sign-in was dropped starts again)."""
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


def principal_for(claims: Mapping[str, Any], rules: Mapping[str, Mapping[str, str]]) -> Principal:
    """The person's principal: `oidc:<sub>`, named by their email, with the highest role any of
    their groups maps to (and that rule's workspace). `NotProvisioned` when none does."""
    groups = claims.get("groups") or []
    if not isinstance(groups, list):
        groups = []
    best: tuple[Role, str | None] | None = None
    for group in sorted(str(g) for g in groups):
        rule = rules.get(group)
        if rule is None:
            continue
        role = Role(rule.get("role", "operator"))
        workspace = None if role is Role.ADMIN else rule.get("workspace", "default")
        if best is None or ROLE_RANK[role] > ROLE_RANK[best[0]]:
            best = (role, workspace)
    if best is None:
        raise NotProvisioned("none of your groups at the identity provider may use this service")
    name = claims.get("email") or claims.get("preferred_username") or claims["sub"]
    person = f"oidc:{claims['sub']}"
    return Principal(
        id=person,
        role=best[0],
        workspace=best[1],
        name=str(name),
        person=person,
        groups=frozenset(str(g) for g in groups),
    )


def pkce_pair() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(slots=True)
class SignIn:
    """A sign-in between the redirect to the provider and its return: used once."""

    nonce: str
    verifier: str
    expires_at: float


@dataclass(slots=True)
class PersonSession:
    """A signed-in person: the principal requests act as, the CSRF token their changes carry."""

    principal: Principal
    csrf_token: str
    expires_at: float
    refreshed_at: float
    refresh_token: str | None = None
    groups: list[str] = field(default_factory=list)


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


class PeopleSignIn:
    """Sign-ins in progress (by `state`) and sessions (by their cookie), in this process."""

    def __init__(self, provider: IdentityProvider, clock: Callable[[], float] = time.time) -> None:
        self.provider = provider
        self.config = provider.config
        self._clock = clock
        self._pending: dict[str, SignIn] = {}
        self._sessions: dict[str, PersonSession] = {}

    async def start(self) -> tuple[str, str]:
        """The state of a new sign-in and the provider URL to send the browser to."""
        now = self._clock()
        self._pending = {s: p for s, p in self._pending.items() if p.expires_at > now}
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        verifier, challenge = pkce_pair()
        # The discovery document is read at each start: a provider that is down fails the sign-in
        # here, in one line, rather than at the provider's address in the person's browser.
        await self.provider.metadata(again=True)
        url = await self.provider.authorization_url(state, nonce, challenge)
        while len(self._pending) >= MAX_PENDING_SIGN_INS:
            del self._pending[next(iter(self._pending))]
        self._pending[state] = SignIn(nonce, verifier, now + SIGN_IN_SECONDS)
        return state, url

    async def finish(self, state: str, code: str, replaces: str | None) -> tuple[str, PersonSession]:
        """The new session (id, session) of a sign-in the provider sent back; the state is spent
        whatever happens, and the session the browser had before, if any, is ended (rotation)."""
        pending = self._pending.pop(state, None)
        now = self._clock()
        if pending is None or pending.expires_at <= now:
            raise SignInFailed("this sign-in is unknown, used already or expired: sign in again")
        grant = {"grant_type": "authorization_code", "code": code, "redirect_uri": self.config.redirect_url}
        answer = await self.provider.tokens({**grant, "code_verifier": pending.verifier})
        claims = await self.provider.claims(answer["id_token"], pending.nonce, now)
        principal = principal_for(claims, self.config.groups)
        if replaces is not None:
            self._sessions.pop(replaces, None)
        session_id = secrets.token_urlsafe(32)
        session = PersonSession(
            principal=principal,
            csrf_token=secrets.token_urlsafe(32),
            expires_at=now + self.config.session_seconds,
            refreshed_at=now,
            refresh_token=answer.get("refresh_token"),
            groups=list(claims.get("groups") or []),
        )
        self._sessions[session_id] = session
        return session_id, session

    async def session(self, session_id: str | None) -> PersonSession:
        """The live session of a cookie, its groups read again when a refresh is due; a person
        the provider no longer puts in a mapped group is signed out (`NotProvisioned`)."""
        found = self._sessions.get(session_id or "")
        now = self._clock()
        if found is None or found.expires_at <= now:
            self._sessions.pop(session_id or "", None)
            raise Unauthenticated("sign in again: your session has ended")
        if found.refresh_token and now - found.refreshed_at >= self.config.refresh_seconds:
            found = await self._refresh(session_id or "", found, now)
        return found

    async def _refresh(self, session_id: str, found: PersonSession, now: float) -> PersonSession:
        grant = {"grant_type": "refresh_token", "refresh_token": found.refresh_token or ""}
        try:
            answer = await self.provider.tokens(grant)
            claims = await self.provider.claims(answer["id_token"], None, now)
        except ProviderUnreachable:
            return found  # the provider is down: the session lasts until it expires
        except SignInFailed:
            self._sessions.pop(session_id, None)
            raise
        try:
            principal = principal_for(claims, self.config.groups)
        except NotProvisioned:
            self._sessions.pop(session_id, None)
            raise
        refreshed = replace(
            found,
            principal=principal,
            refreshed_at=now,
            refresh_token=answer.get("refresh_token") or found.refresh_token,
            groups=list(claims.get("groups") or []),
        )
        self._sessions[session_id] = refreshed
        return refreshed

    async def bearer(self, id_token: str) -> Principal:
        """The person an ID token of this client names (`Authorization: Bearer <ID token>`, what
        `sursis login` sends): checked like a sign-in's, without a nonce (none was asked); the
        groups are the token's, so a token lives only as long as the provider made it."""
        claims = await self.provider.claims(id_token, None, self._clock())
        return principal_for(claims, self.config.groups)

    def end(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
