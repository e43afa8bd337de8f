"""Sessions kept in the database: a person signed in through one API process is served by another
(on the same database), only hashes of the cookie and the state are stored, the refresh token is
sealed; and groups read from the provider's userinfo endpoint when the ID token has none."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.app.oidc_provider import IdentityProvider, OidcConfig, SignInFailed
from sursis.domain.identity.keys import IssuedKey
from sursis.infra.db.engine import create_engine
from sursis.infra.db.people_tables import person_sessions, person_sign_ins
from tests.api.oidc_provider import LocalProvider, provider_redirect, sign_in, start_provider
from tests.api.test_oidc_signin import status_of, waiting_call
from tests.conftest import bearer, make_settings

PEOPLE = {"alice": {"email": "alice@example.com", "groups": ["finance"]}}
RULES = {"finance": {"role": "operator", "workspace": "default"}}
DOMAIN = "testserver.local"


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    yield from start_provider(tmp_path, PEOPLE)


async def stored(database_url: str, table: sa.Table) -> list[dict[str, Any]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            return [dict(row._mapping) for row in await conn.execute(sa.select(table))]
    finally:
        await engine.dispose()


async def test_a_session_made_by_one_api_process_is_served_by_another(
    seeded: str, provider: LocalProvider, admin_key: IssuedKey
) -> None:
    admin = bearer(admin_key.secret)
    settings = make_settings(seeded, **provider.settings(**RULES))
    async with (
        AsyncTestClient(app=create_app(settings)) as one,
        AsyncTestClient(app=create_app(settings)) as other,
    ):
        correlation_id = await waiting_call(one, admin)
        # Started on one process, back from the provider on the other.
        callback = await provider_redirect(one, "alice")
        other.cookies.set("sursis_sign_in", one.cookies.get("sursis_sign_in") or "", domain=DOMAIN)
        back = await other.get(callback, follow_redirects=False)
        assert back.status_code in (302, 303), back.text
        cookie = other.cookies.get("sursis_session") or ""
        assert cookie
        one.cookies.clear()
        one.cookies.set("sursis_session", cookie, domain=DOMAIN)

        session = await one.get("/auth/oidc/session")
        assert session.status_code == 200, session.text
        assert (session.json()["id"], session.json()["role"]) == ("oidc:alice", "operator")
        csrf = (await other.get("/auth/oidc/session")).json()["csrf_token"]
        assert csrf == session.json()["csrf_token"]
        url = f"/v1/pending/{correlation_id}/resolve"
        decided = await one.post(url, json={"decision": "approve"}, headers={"X-CSRF-Token": csrf})
        assert decided.status_code == 200, decided.text
        assert decided.json()["resolved_by"] == "oidc:alice"
        assert await status_of(other, admin, correlation_id) != "awaiting"

        # What the database holds: the cookie's hash, never the cookie or the CSRF token.
        [row] = await stored(seeded, person_sessions)
        assert row["id_hash"] == hashlib.sha256(cookie.encode()).hexdigest()
        assert not any(cookie in str(v) or csrf in str(v) for v in row.values())
        assert row["person"] == "oidc:alice" and row["groups"] == ["finance"]
        assert await stored(seeded, person_sign_ins) == []  # the state was spent

        # Signed out through one process: refused by the other at its next request.
        out = await one.post("/auth/oidc/logout", headers={"X-CSRF-Token": csrf})
        assert out.status_code == 204
        assert (await other.get("/v1/pending")).status_code == 401
        assert await stored(seeded, person_sessions) == []


async def test_a_sign_in_is_spent_once_across_processes(seeded: str, provider: LocalProvider) -> None:
    settings = make_settings(seeded, **provider.settings(**RULES))
    async with (
        AsyncTestClient(app=create_app(settings)) as one,
        AsyncTestClient(app=create_app(settings)) as other,
    ):
        callback = await provider_redirect(one, "alice")
        other.cookies.set("sursis_sign_in", one.cookies.get("sursis_sign_in") or "", domain=DOMAIN)
        assert (await one.get(callback, follow_redirects=False)).status_code in (302, 303)
        replayed = await other.get(callback, follow_redirects=False)
        assert replayed.status_code == 401 and replayed.json()["code"] == "sign_in_failed"


async def test_the_refresh_token_is_sealed_when_encryption_is_on(
    database_url: str, provider: LocalProvider
) -> None:
    keyring = f"k1:{base64.b64encode(os.urandom(32)).decode()}"
    settings = make_settings(
        database_url, **provider.settings(**RULES), encryption_keys=keyring, oidc_refresh_seconds=0.001
    )
    async with AsyncTestClient(app=create_app(settings)) as http:
        await sign_in(http, "alice")
        [row] = await stored(database_url, person_sessions)
        assert row["refresh_token"].startswith("sursis:enc:1:k1:")
        # A refresh (due at every request here) opens it, uses it and seals the new one.
        assert (await http.get("/v1/pending")).status_code == 200
        [after] = await stored(database_url, person_sessions)
        assert after["refresh_token"].startswith("sursis:enc:1:k1:")
        assert after["refreshed_at"] > row["refreshed_at"]


@pytest.fixture
def userinfo_provider(tmp_path: Path) -> Iterator[LocalProvider]:
    yield from start_provider(tmp_path, PEOPLE, groups_in="userinfo")


async def test_groups_only_in_userinfo_are_read_there_at_sign_in_and_refresh(
    seeded: str, userinfo_provider: LocalProvider
) -> None:
    settings = make_settings(seeded, **userinfo_provider.settings(**RULES), oidc_refresh_seconds=0.001)
    async with AsyncTestClient(app=create_app(settings)) as http:
        session = await sign_in(http, "alice")
        assert (session["role"], session["name"], session["groups"]) == (
            "operator",
            "alice@example.com",
            ["finance"],
        )
        assert (await http.get("/v1/pending")).status_code == 200  # refreshed: still in finance
        userinfo_provider.set_groups("alice", [])
        refused = await http.get("/v1/pending")
        assert refused.status_code == 403 and refused.json()["code"] == "not_provisioned"
        assert (await http.get("/auth/oidc/session")).status_code == 401


async def test_without_userinfo_the_same_person_is_not_provisioned(
    seeded: str, userinfo_provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider set-up the test above relies on: its ID tokens carry no groups, so a service
    that did not ask userinfo would let nobody in."""

    async def nothing(self: IdentityProvider, access_token: str, subject: str) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(IdentityProvider, "userinfo", nothing)
    settings = make_settings(seeded, **userinfo_provider.settings(**RULES))
    async with AsyncTestClient(app=create_app(settings)) as http:
        callback = await provider_redirect(http, "alice")
        refused = await http.get(callback, follow_redirects=False)
        assert refused.status_code == 403 and refused.json()["code"] == "not_provisioned"


def fake_userinfo(answer: dict[str, Any]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/.well-known/openid-configuration":
            return httpx.Response(
                200,
                json={"issuer": "https://id.example.com", "userinfo_endpoint": "https://id.example.com/me"},
            )
        assert request.headers["authorization"] == "Bearer the-access-token"
        return httpx.Response(200, json=answer)

    return httpx.MockTransport(handle)


async def test_a_userinfo_answer_about_another_person_is_refused() -> None:
    config = OidcConfig("https://id.example.com", "c", "s", "https://s.example.com/cb", "openid", 60, 60, {})
    honest = IdentityProvider(config, fake_userinfo({"sub": "alice", "groups": ["finance"]}))
    assert (await honest.userinfo("the-access-token", "alice"))["groups"] == ["finance"]
    swapped = IdentityProvider(config, fake_userinfo({"sub": "mallory", "groups": ["sursis-admins"]}))
    with pytest.raises(SignInFailed):
        await swapped.userinfo("the-access-token", "alice")
