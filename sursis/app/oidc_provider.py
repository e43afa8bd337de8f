"""The company's OpenID provider as the service talks to it: discovery, keys, the token and
userinfo endpoints, and the ID token checked by `joserfc` (signature against the provider's JWKS,
`iss`, `aud`, `exp`, `nonce`), never by hand. Sign-ins and sessions are `sursis.app.oidc`'s."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx
import structlog

from sursis.app.settings import Settings
from sursis.domain.errors import Unauthenticated

if TYPE_CHECKING:
    # joserfc loads `cryptography` (megabytes per process): imported where a token is checked, so
    # a service without people's sign-in never loads it.
    from joserfc.jwk import KeySet

log = structlog.get_logger("sursis.app.oidc")
ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"]
KEYS_AGAIN_SECONDS = 60.0


class SignInFailed(Unauthenticated):
    code = "sign_in_failed"


class ProviderUnreachable(SignInFailed):
    """The provider did not answer: new sign-ins fail (503), sessions already open go on."""

    code = "identity_provider_unreachable"
    status = 503


def unreachable(error: Exception) -> ProviderUnreachable:
    log.warning("identity provider unreachable", error=str(error))
    return ProviderUnreachable(f"the identity provider cannot be reached: {error}")


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
