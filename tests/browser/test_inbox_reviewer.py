"""The inbox shows a reviewer model's verdict, in a real browser: a badge in the list and the model,
question, verdict, what it did and its reason in the call's details."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, expect

from sursis.app.main import create_app
from tests.api.live import serve
from tests.browser.conftest import InboxApp
from tests.conftest import KeyMaker, admin_headers, bearer, call, eventually, make_settings, script


@pytest.fixture
async def reviewed_inbox(seeded: str, keys: KeyMaker, browser: Browser) -> AsyncIterator[InboxApp]:
    settings = make_settings(
        seeded,
        events_poll_seconds=0.1,
        reviewer_poll_seconds=0.1,
        agents=["tests.channels.test_slack_reviewer:AGENT"],
    )
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


async def test_the_verdict_is_in_the_list_and_the_details(reviewed_inbox: InboxApp) -> None:
    inbox = reviewed_inbox
    ann, rex = [await inbox.keys.issue("operator", "default", name=n) for n in ("ann", "rex")]
    conversation = (
        await inbox.http.post("/v1/conversations", json={"agent": "payments"}, headers=bearer(rex.secret))
    ).json()
    run = await inbox.http.post(
        f"/v1/conversations/{conversation['id']}/messages?wait=10",
        json={"content": script(call("refund", order_id="R1", amount=900))},
        headers=bearer(rex.secret),
    )
    [pending] = run.json()["pending"]

    async def verdict() -> dict[str, Any] | None:
        found = await inbox.pending(pending["correlation_id"])
        return found if (found.get("review") or {}).get("effect") else None

    await eventually(verdict, limit=30)
    page = await inbox.signed_in(ann.secret)
    item = page.locator(".call-link")
    await expect(item).to_contain_text("reviewer: risky")
    await item.click()
    details = page.locator("#detail-review")
    await expect(details).to_contain_text("scripted asked")
    await expect(details).to_contain_text("risky · left to people — a large refund (policy v1)")
    await expect(page.locator("#decide")).to_be_visible()
