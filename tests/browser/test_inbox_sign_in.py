"""People sign in to the inbox with a real OpenID provider (npm's `oidc-provider`, started here), in
headless Chromium: two people of the provider's group `finance` meet a quorum of two routed to
`idp:finance`; the first person, opening the inbox again with a key linked to her, is one approver
already counted and is offered nothing to decide."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from sursis.app.main import create_app
from sursis.app.service import Service
from sursis.domain.access import Role
from sursis.domain.policy_decisions import ApprovalRoute
from tests.api.live import serve
from tests.api.oidc_provider import LocalProvider, free_port, start_provider
from tests.browser.conftest import InboxApp, sign_in
from tests.conftest import KeyMaker, admin_headers, bearer, call, eventually, make_settings, script
from tests.routing.kit import payments_agent

PEOPLE = {
    "alice": {"email": "alice@example.com", "groups": ["finance"]},
    "bob": {"email": "bob@example.com", "groups": ["finance", "sre"]},
}
RULES = {"finance": {"role": "operator", "workspace": "default"}}
ROUTES = {"Q1": ApprovalRoute(groups=("idp:finance", "keyholders"), quorum=2)}
APP_PORT = free_port()


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    yield from start_provider(tmp_path, PEOPLE, f"http://127.0.0.1:{APP_PORT}/auth/oidc/callback")


@pytest.fixture
async def people_inbox(
    seeded: str, keys: KeyMaker, browser: Browser, provider: LocalProvider
) -> AsyncIterator[InboxApp]:
    settings = make_settings(seeded, events_poll_seconds=0.1, **provider.settings(**RULES))
    service = Service.from_settings(settings, agents=[payments_agent(ROUTES)])
    async with (
        serve(create_app(settings, service=service), port=APP_PORT) as url,
        httpx.AsyncClient(base_url=url, timeout=30, headers=await admin_headers(seeded)) as http,
    ):
        app = InboxApp(base_url=url, http=http, keys=keys, browser=browser)
        try:
            yield app
        finally:
            for page in app.pages:
                await page.context.close()
    assert app.page_errors == []


async def sign_in_with_provider(inbox: InboxApp, person: str) -> Page:
    page = await inbox.page()
    await page.get_by_role("link", name="Sign in with your identity provider").click()
    await page.locator("input[name=login]").fill(person)
    await page.locator("input[name=password]").fill("any")
    await page.locator("button[type=submit]").click()
    await expect(page.get_by_role("heading", name="Awaiting a decision")).to_be_visible()
    await expect(page.locator("#live")).to_have_text("Live")
    cookies = {c["name"]: c for c in await page.context.cookies()}
    assert cookies["sursis_session"]["httpOnly"] and cookies["sursis_session"]["sameSite"] == "Lax"
    return page


async def test_two_people_meet_a_quorum_and_a_linked_key_is_the_same_person(people_inbox: InboxApp) -> None:
    inbox = people_inbox
    requester = bearer(await inbox.keys.make(Role.OPERATOR, name="requester"))
    alices_key = await inbox.keys.issue(Role.OPERATOR, name="alice's key")
    linked = await inbox.http.put(f"/v1/keys/{alices_key.key.id}/person", json={"person": "oidc:alice"})
    assert linked.status_code == 200, linked.text
    group = {"workspace": "default", "name": "keyholders", "members": [str(alices_key.key.id)]}
    assert (await inbox.http.post("/v1/groups", json=group)).status_code == 201
    conversation = (
        await inbox.http.post("/v1/conversations", json={"agent": "payments"}, headers=requester)
    ).json()
    run = await inbox.http.post(
        f"/v1/conversations/{conversation['id']}/messages?wait=10",
        json={"content": script(call("refund", order_id="Q1", amount=900))},
        headers=requester,
    )
    [pending] = run.json()["pending"]

    alice = await sign_in_with_provider(inbox, "alice")
    await alice.locator(".call-link").click()
    await expect(alice.locator("#detail-approvals")).to_have_text("0 of 2 approvals · 2 still needed")
    await alice.get_by_role("button", name="Approve", exact=True).click()
    await expect(alice.locator("#detail-approvals")).to_have_text("1 of 2 approvals · 1 still needed")

    # Alice again, through the key an admin linked to her: one approver, counted already.
    with_key = await inbox.page()
    await sign_in(with_key, alices_key.secret)
    await with_key.locator(".call-link").click()
    await expect(with_key.locator("#detail-approvals")).to_have_text("1 of 2 approvals · 1 still needed")
    await expect(with_key.locator("#decide")).to_be_hidden()
    refused = await inbox.http.post(
        f"/v1/pending/{pending['correlation_id']}/resolve",
        json={"decision": "approve"},
        headers=bearer(alices_key.secret),
    )
    assert (refused.status_code, refused.json()["code"]) == (409, "already_voted")

    bob = await sign_in_with_provider(inbox, "bob")
    await bob.locator(".call-link").click()
    await bob.get_by_role("button", name="Approve", exact=True).click()

    async def approved() -> dict[str, Any] | None:
        found = await inbox.pending(pending["correlation_id"])
        return found if found["status"] == "approved" else None

    decided = await eventually(approved)
    assert sorted(v["approver"] for v in decided["votes"]) == ["oidc:alice", "oidc:bob"]

    [session] = [c["value"] for c in await bob.context.cookies() if c["name"] == "sursis_session"]
    await bob.get_by_role("button", name="Sign out").click()
    await expect(bob.get_by_role("link", name="Sign in with your identity provider")).to_be_visible()

    async def cookie_gone() -> bool:
        return "sursis_session" not in {c["name"] for c in await bob.context.cookies() if c["value"]}

    # The page turns to the sign-in link at once; the sign-out request ends the session beside it.
    await eventually(cookie_gone)
    async with httpx.AsyncClient(base_url=inbox.base_url, cookies={"sursis_session": session}) as stale:
        assert (await stale.get("/v1/me")).status_code == 401
