"""People sign in with a real OpenID provider (npm's certified `oidc-provider`, started here) and
decide calls as themselves: the session cookie, its CSRF token, the group rules, the refresh."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from tests.api.http_calls import create_conversation, post_message
from tests.api.oidc_provider import LocalProvider, provider_redirect, sign_in, start_provider
from tests.conftest import bearer, call, make_settings, script

PEOPLE = {
    "alice": {"email": "alice@example.com", "groups": ["finance"]},
    "olga": {"email": "olga@example.com", "groups": ["other-team"]},
    "nobody": {"email": "nobody@example.com", "groups": ["marketing"]},
}
RULES = {
    "finance": {"role": "operator", "workspace": "default"},
    "other-team": {"role": "operator", "workspace": "ws2"},
}
REPLAY = script([call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")])


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    yield from start_provider(tmp_path, PEOPLE)


async def _app(seeded: str, provider: LocalProvider, **overrides: Any) -> AsyncTestClient[Any]:
    settings = make_settings(seeded, **provider.settings(**RULES), **overrides)
    return AsyncTestClient(app=create_app(settings))


@pytest.fixture
async def http(seeded: str, provider: LocalProvider) -> AsyncIterator[AsyncTestClient[Any]]:
    async with await _app(seeded, provider) as client:
        yield client


async def waiting_call(http: AsyncTestClient[Any], admin: dict[str, str]) -> str:
    http.headers.update(admin)
    try:
        run = await post_message(http, await create_conversation(http), REPLAY)
    finally:
        del http.headers["Authorization"]
    [pending] = run["pending"]
    return str(pending["correlation_id"])


async def status_of(http: AsyncTestClient[Any], admin: dict[str, str], correlation_id: str) -> str:
    found = await http.get(f"/v1/pending/{correlation_id}", headers=admin)
    assert found.status_code == 200, found.text
    return str(found.json()["status"])


async def test_a_person_of_a_mapped_group_approves_as_themselves(
    http: AsyncTestClient[Any], admin_key: IssuedKey
) -> None:
    admin = bearer(admin_key.secret)
    correlation_id = await waiting_call(http, admin)
    session = await sign_in(http, "alice")
    assert (session["id"], session["name"], session["role"]) == (
        "oidc:alice",
        "alice@example.com",
        "operator",
    )
    cookie = http.cookies.jar
    assert any(c.name == "sursis_session" and c.has_nonstandard_attr("HttpOnly") for c in cookie)

    listed = await http.get("/v1/pending", params={"status": "awaiting"})
    assert [p["correlation_id"] for p in listed.json()["items"]] == [correlation_id]

    url = f"/v1/pending/{correlation_id}/resolve"
    refused = await http.post(url, json={"decision": "approve"})
    assert refused.status_code == 403 and refused.json()["code"] == "csrf_token_missing"
    forged = await http.post(url, json={"decision": "approve"}, headers={"X-CSRF-Token": "guess"})
    assert forged.status_code == 403
    assert await status_of(http, admin, correlation_id) == "awaiting"

    decided = await http.post(
        url, json={"decision": "approve"}, headers={"X-CSRF-Token": session["csrf_token"]}
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["resolved_by"] == "oidc:alice"


async def test_signing_in_again_rotates_the_session_and_signing_out_ends_it(
    http: AsyncTestClient[Any],
) -> None:
    first = await sign_in(http, "alice")
    old_cookie = http.cookies.get("sursis_session")
    second = await sign_in(http, "alice")
    new_cookie = http.cookies.get("sursis_session")
    assert new_cookie not in (None, old_cookie)
    assert second["csrf_token"] != first["csrf_token"]
    http.cookies.set("sursis_session", old_cookie or "", domain="testserver.local")
    assert (await http.get("/v1/pending")).status_code == 401
    http.cookies.set("sursis_session", new_cookie or "", domain="testserver.local")
    assert (await http.get("/v1/pending")).status_code == 200

    assert (await http.post("/auth/oidc/logout")).status_code == 403
    out = await http.post("/auth/oidc/logout", headers={"X-CSRF-Token": second["csrf_token"]})
    assert out.status_code == 204
    assert (await http.get("/auth/oidc/session")).status_code == 401


async def test_a_replayed_state_is_refused(http: AsyncTestClient[Any]) -> None:
    callback = await provider_redirect(http, "alice")
    assert (await http.get(callback, follow_redirects=False)).status_code in (302, 303)
    replayed = await http.get(callback, follow_redirects=False)
    assert replayed.status_code == 401
    assert replayed.json()["code"] == "sign_in_failed"


async def test_a_state_from_another_browser_is_refused(http: AsyncTestClient[Any]) -> None:
    callback = await provider_redirect(http, "alice")
    http.cookies.delete("sursis_sign_in")
    refused = await http.get(callback, follow_redirects=False)
    assert refused.status_code == 401
    assert (await http.get("/auth/oidc/session")).status_code == 401


async def test_a_person_in_no_mapped_group_may_not_sign_in(http: AsyncTestClient[Any]) -> None:
    callback = await provider_redirect(http, "nobody")
    refused = await http.get(callback, follow_redirects=False)
    assert refused.status_code == 403
    assert refused.json()["code"] == "not_provisioned"
    assert (await http.get("/auth/oidc/session")).status_code == 401


async def test_a_session_of_another_workspace_decides_nothing(
    http: AsyncTestClient[Any], admin_key: IssuedKey
) -> None:
    admin = bearer(admin_key.secret)
    correlation_id = await waiting_call(http, admin)
    session = await sign_in(http, "olga")
    assert session["workspace"] == "ws2"
    url = f"/v1/pending/{correlation_id}/resolve"
    refused = await http.post(
        url, json={"decision": "approve"}, headers={"X-CSRF-Token": session["csrf_token"]}
    )
    assert refused.status_code == 404
    assert await status_of(http, admin, correlation_id) == "awaiting"


async def test_a_person_removed_from_the_group_is_refused_after_refresh(
    seeded: str, provider: LocalProvider, admin_key: IssuedKey
) -> None:
    admin = bearer(admin_key.secret)
    async with await _app(seeded, provider, oidc_refresh_seconds=0.001) as http:
        correlation_id = await waiting_call(http, admin)
        session = await sign_in(http, "alice")
        assert (await http.get("/v1/pending")).status_code == 200  # refreshed: still in finance
        provider.set_groups("alice", [])
        url = f"/v1/pending/{correlation_id}/resolve"
        headers = {"X-CSRF-Token": session["csrf_token"]}
        refused = await http.post(url, json={"decision": "approve"}, headers=headers)
        assert refused.status_code == 403 and refused.json()["code"] == "not_provisioned"
        assert (await http.get("/v1/pending")).status_code == 401
        assert await status_of(http, admin, correlation_id) == "awaiting"


async def test_sign_in_is_off_unless_configured(client: AsyncTestClient[Any]) -> None:
    assert (await client.get("/auth/oidc/login", follow_redirects=False)).status_code == 404
    # A cookie is nobody without sign-in configured: the key rules as before.
    del client.headers["Authorization"]
    client.cookies.set("sursis_session", "x", domain="testserver.local")
    assert (await client.get("/v1/pending")).status_code == 401


async def test_while_the_provider_is_down_sessions_go_on_and_new_sign_ins_fail_in_one_line(
    seeded: str, provider: LocalProvider, admin_key: IssuedKey
) -> None:
    admin = bearer(admin_key.secret)
    async with await _app(seeded, provider, oidc_refresh_seconds=0.001) as http:
        correlation_id = await waiting_call(http, admin)
        session = await sign_in(http, "alice")
        provider.stop()
        # A refresh is due at every request here: the provider cannot answer it, the session goes on.
        assert (await http.get("/v1/pending")).status_code == 200
        url = f"/v1/pending/{correlation_id}/resolve"
        headers = {"X-CSRF-Token": session["csrf_token"]}
        decided = await http.post(url, json={"decision": "approve"}, headers=headers)
        assert decided.status_code == 200, decided.text

        http.cookies.clear()
        refused = await http.get("/auth/oidc/login", follow_redirects=False)
        assert refused.status_code == 503
        problem = refused.json()
        assert problem["code"] == "identity_provider_unreachable"
        assert problem["detail"].startswith("the identity provider cannot be reached")
        assert "\n" not in problem["detail"]
