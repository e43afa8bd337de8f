"""The inbox on a call routed to an approver group, in a real browser: votes, still needed and the
escalation level are shown, the decide buttons only to the keys that may vote, and another
approver's vote reaches an open page live."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from playwright.async_api import Browser, expect

from sursis.app.main import create_app
from tests.api.live import serve
from tests.browser.conftest import InboxApp
from tests.conftest import KeyMaker, admin_headers, bearer, call, make_settings, script


@pytest.fixture
async def routed_inbox(seeded: str, keys: KeyMaker, browser: Browser) -> AsyncIterator[InboxApp]:
    settings = make_settings(seeded, events_poll_seconds=0.1, agents=["tests.routing.kit:CLI_AGENT"])
    async with (
        serve(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, timeout=30, headers=await admin_headers(seeded)) as http,
    ):
        app = InboxApp(base_url=url, http=http, keys=keys, browser=browser)
        try:
            yield app
        finally:
            for page in app.pages:
                await page.context.close()
    assert app.page_errors == []


async def test_votes_still_needed_and_buttons_only_for_approvers(routed_inbox: InboxApp) -> None:
    inbox = routed_inbox
    people = {n: await inbox.keys.issue("operator", "default", name=n) for n in ("ann", "bob", "out", "rex")}
    members = [str(people[n].key.id) for n in ("ann", "bob")]
    group = {"workspace": "default", "name": "finance", "members": members}
    assert (await inbox.http.post("/v1/groups", json=group)).status_code == 201
    rex = bearer(people["rex"].secret)
    conversation = (
        await inbox.http.post("/v1/conversations", json={"agent": "payments"}, headers=rex)
    ).json()
    run = await inbox.http.post(
        f"/v1/conversations/{conversation['id']}/messages?wait=10",
        json={"content": script(call("refund", order_id="L1", amount=900))},
        headers=rex,
    )
    [pending] = run.json()["pending"]

    outsider = await inbox.signed_in(people["out"].secret)
    item = outsider.locator(".call-link")
    await expect(item).to_contain_text("0/2")
    await item.click()
    await expect(outsider.locator("#detail-approvals")).to_have_text("0 of 2 approvals · 2 still needed")
    await expect(outsider.locator("#detail-meta")).to_contain_text("group:finance")
    await expect(outsider.locator("#detail-meta")).to_contain_text("not escalated")
    await expect(outsider.locator("#decide")).to_be_hidden()
    await expect(outsider.locator("#detail-state")).to_contain_text("not one of this call's approvers")

    bob = await inbox.signed_in(people["bob"].secret)
    await bob.locator(".call-link").click()
    await expect(bob.locator("#decide")).to_be_visible()

    ann = await inbox.signed_in(people["ann"].secret)
    await ann.locator(".call-link").click()
    await expect(ann.locator("#decide")).to_be_visible()
    await ann.get_by_role("button", name="Approve", exact=True).click()
    await expect(ann.locator("#detail-state")).to_contain_text("Your vote is counted: 1 of 2 approvals")
    await expect(ann.locator("#decide")).to_be_hidden()
    await expect(ann.locator("#detail-votes")).to_contain_text("approve by ann")

    # Bob's open page hears of ann's vote on the stream.
    await expect(bob.locator("#detail-approvals")).to_have_text("1 of 2 approvals · 1 still needed")
    await expect(bob.locator(".call-link")).to_contain_text("1/2")
    await bob.get_by_role("button", name="Approve", exact=True).click()
    await expect(bob.locator("#detail-state")).to_contain_text("You approved this call")
    assert (await inbox.pending(pending["correlation_id"]))["status"] == "approved"
