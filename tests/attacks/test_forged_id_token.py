"""An ID token the service must not believe: forged, expired, for another client, from another
issuer, answering another sign-in, or unsigned. Each ends the sign-in with 401 and no session.

The provider here is a small fake behind httpx's transport (discovery, keys, token endpoint) so a
test can hand the service any token; the real provider's flow is tested in tests/api."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from sursis.app import oidc
from sursis.app.oidc import PeopleSignIn
from sursis.app.oidc_provider import IdentityProvider, OidcConfig, SignInFailed, validate_id_token
from tests.fakes.people import FakePersonSessions

ISSUER = "https://idp.example.com"
CLIENT = "sursis"
PROVIDER_KEY = RSAKey.generate_key(2048, parameters={"kid": "idp-1", "use": "sig"})
ATTACKER_KEY = RSAKey.generate_key(2048, parameters={"kid": "idp-1", "use": "sig"})
RULES = {"finance": {"role": "operator", "workspace": "default"}}

Claims = Callable[[str], dict[str, Any]]


def good(nonce: str) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": ISSUER,
        "aud": CLIENT,
        "sub": "alice",
        "email": "alice@example.com",
        "groups": ["finance"],
        "iat": now,
        "exp": now + 300,
        "nonce": nonce,
    }


def signed(claims: dict[str, Any], key: RSAKey = PROVIDER_KEY) -> str:
    return jwt.encode({"alg": "RS256", "kid": "idp-1"}, claims, key)


def unsigned(claims: dict[str, Any]) -> str:
    import base64

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'kid': 'idp-1'})}.{part(claims)}."


def fake_provider(id_token: Callable[[str], str]) -> tuple[httpx.MockTransport, dict[str, str]]:
    """The provider's three endpoints; the token endpoint answers `id_token(nonce)`."""
    seen: dict[str, str] = {}

    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/.well-known/openid-configuration":
            return httpx.Response(
                200,
                json={
                    "issuer": ISSUER,
                    "authorization_endpoint": ISSUER + "/auth",
                    "token_endpoint": ISSUER + "/token",
                    "jwks_uri": ISSUER + "/jwks",
                },
            )
        if path == "/jwks":
            return httpx.Response(200, json=KeySet([PROVIDER_KEY]).as_dict(private=False))
        if path == "/token":
            form = parse_qs(request.content.decode())
            assert form["code_verifier"], "PKCE verifier sent"
            return httpx.Response(200, json={"id_token": id_token(seen["nonce"]), "token_type": "Bearer"})
        return httpx.Response(404)

    return httpx.MockTransport(handle), seen


async def sign_in_with(id_token: Callable[[str], str]) -> PeopleSignIn:
    transport, seen = fake_provider(id_token)
    config = OidcConfig(ISSUER, CLIENT, "secret", "https://sursis.example.com/cb", "openid", 3600, 300, RULES)
    people = PeopleSignIn(IdentityProvider(config, transport), FakePersonSessions())
    state, url = await people.start()
    query = parse_qs(urlsplit(url).query)
    assert query["code_challenge_method"] == ["S256"]
    seen["nonce"] = query["nonce"][0]
    await people.finish(state, "the-code", None)
    return people


async def test_the_provider_s_own_token_signs_in() -> None:
    people = await sign_in_with(lambda nonce: signed(good(nonce)))
    assert isinstance(people._sessions, FakePersonSessions)
    assert len(people._sessions.sessions) == 1


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(lambda n: signed(good(n), ATTACKER_KEY), id="forged-signature"),
        pytest.param(lambda n: signed({**good(n), "exp": int(time.time()) - 120}), id="expired"),
        pytest.param(lambda n: signed({**good(n), "aud": "another-client"}), id="wrong-aud"),
        pytest.param(lambda n: signed({**good(n), "iss": "https://evil.example.com"}), id="wrong-iss"),
        pytest.param(lambda n: signed({**good(n), "nonce": "another-sign-in"}), id="wrong-nonce"),
        pytest.param(lambda n: signed({k: v for k, v in good(n).items() if k != "nonce"}), id="no-nonce"),
        pytest.param(lambda n: unsigned(good(n)), id="alg-none"),
    ],
)
async def test_a_bad_id_token_ends_the_sign_in(token: Callable[[str], str]) -> None:
    with pytest.raises(SignInFailed):
        await sign_in_with(token)


def test_the_validator_refuses_a_token_signed_by_another_key() -> None:
    keys = KeySet([PROVIDER_KEY])
    token = signed(good("n"), ATTACKER_KEY)
    with pytest.raises(SignInFailed):
        validate_id_token(token, keys, issuer=ISSUER, client_id=CLIENT, nonce="n", now=time.time())
    claims = validate_id_token(
        signed(good("n")), keys, issuer=ISSUER, client_id=CLIENT, nonce="n", now=time.time()
    )
    assert claims["sub"] == "alice"


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param({"exp": int(time.time()) - 120}, id="expired"),
        pytest.param({"aud": "another-client"}, id="wrong-aud"),
        pytest.param({"iss": "https://evil.example.com"}, id="wrong-iss"),
    ],
)
async def test_a_bad_bearer_id_token_is_refused(claims: dict[str, Any]) -> None:
    """What `sursis login` sends (`Authorization: Bearer <ID token>`) is checked the same way."""
    transport, _ = fake_provider(lambda nonce: "")
    config = OidcConfig(ISSUER, CLIENT, "secret", "https://sursis.example.com/cb", "openid", 3600, 300, RULES)
    people = PeopleSignIn(IdentityProvider(config, transport), FakePersonSessions())
    assert (await people.bearer(signed(good("n")))).id == "oidc:alice"
    with pytest.raises(SignInFailed):
        await people.bearer(signed({**good("n"), **claims}))
    with pytest.raises(SignInFailed):
        await people.bearer(signed(good("n"), ATTACKER_KEY))


async def test_a_flood_of_started_sign_ins_keeps_a_bounded_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oidc, "MAX_PENDING_SIGN_INS", 5)
    transport, _ = fake_provider(lambda nonce: "")
    config = OidcConfig(ISSUER, CLIENT, "secret", "https://sursis.example.com/cb", "openid", 3600, 300, RULES)
    people = PeopleSignIn(IdentityProvider(config, transport), FakePersonSessions())
    states = [(await people.start())[0] for _ in range(8)]
    assert isinstance(people._sessions, FakePersonSessions)
    assert len(people._sessions.sign_ins) == 5
    with pytest.raises(SignInFailed):
        await people.finish(states[0], "code", None)  # the oldest was forgotten
