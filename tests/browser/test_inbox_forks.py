"""The inbox shows where a forked conversation came from, above the copied messages."""

from __future__ import annotations

from playwright.async_api import expect

from tests.browser.conftest import InboxApp
from tests.conftest import call, script

GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")])


async def test_a_call_of_a_fork_shows_the_conversation_it_was_forked_from(inbox: InboxApp) -> None:
    created = await inbox.http.post("/v1/conversations", json={"agent": "ops"})
    original = created.json()["id"]
    posted = await inbox.http.post(
        f"/v1/conversations/{original}/messages", params={"wait": 10}, json={"content": "hello"}
    )
    assert posted.json()["status"] == "completed", posted.text
    forked = await inbox.http.post(
        f"/v1/conversations/{original}/fork", params={"wait": 10}, json={"at": 1, "message": GATED}
    )
    assert forked.status_code == 201, forked.text
    assert forked.json()["run"]["status"] == "suspended"

    page = await inbox.signed_in(await inbox.keys.make("operator", "default"))
    await page.locator(".call-link", has_text="replay_dlq_event").click()
    notice = page.locator("#conversation .turn-fork")
    await expect(notice).to_contain_text("Forked from")
    await expect(notice).to_contain_text(f"conversation {original} at message 1")
    turns = page.locator("#conversation .turn")
    await expect(turns.first).to_have_class("turn turn-fork")
    await expect(page.locator("#conversation .turn-user")).to_contain_text("partner endpoint is back")
