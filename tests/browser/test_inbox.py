"""The operator inbox in a real browser: sign in, live list, decisions, races, keyboard, screenshots."""

from __future__ import annotations

import json
import re

from playwright.async_api import Locator, Page, Route, expect

from tests.browser.conftest import KEY_STORAGE, InboxApp, artifact, sign_in
from tests.conftest import call, script

REPLAY = script(
    [call("list_dlq_events", limit=2)],
    [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
)
TRIAGE = script(
    [call("triage_cluster", cluster_id="clu_webhook_timeout", status="wait", notes="partner fix pending")]
)

REVISE = script(
    [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
    [call("replay_dlq_event", event_id="evt_1002", reason="the newer one")],
)
ASK = script([call("ask_operator", question="Which endpoint should the replays use?")])


def call_item(page: Page, text: str) -> Locator:
    return page.locator(".call-link", has_text=text)


async def test_sign_in_see_a_call_arrive_live_approve_it_and_watch_the_run_complete(inbox: InboxApp) -> None:
    key = await inbox.keys.make("operator", "default", name="alice")
    page = await inbox.signed_in(key)

    await expect(page.locator("#who")).to_have_text("alice · operator · workspace default")
    assert await page.evaluate(f"sessionStorage.getItem('{KEY_STORAGE}')") == key
    assert key not in page.url
    await expect(page.locator("#list-empty")).to_have_text("Nothing is waiting for a decision.")

    pending = await inbox.suspend(REPLAY)
    item = page.locator(".call-link")
    await expect(item).to_have_count(1)  # arrived on the stream, no reload
    await expect(item).to_contain_text("replay_dlq_event")
    await expect(item).to_contain_text("Replay DLQ event evt_1001")
    await expect(item).to_contain_text("agent ops")
    await expect(item).to_contain_text("event_id: evt_1001")
    await expect(item).to_contain_text("reason: partner endpoint is back")
    await expect(item).to_contain_text(re.compile(r"(just now|\d+ s ago) · expires in 2[34] h"))
    await expect(page.locator("#pending-count")).to_have_text("(1)")

    await item.click()
    await expect(page.locator("#detail-title")).to_have_text("replay_dlq_event")
    await expect(page.locator("#detail-effect")).to_have_text("Replay DLQ event evt_1001")
    await expect(page.locator("#detail-args")).to_contain_text('"reason": "partner endpoint is back"')
    conversation = page.locator("#conversation")
    await expect(conversation.locator(".turn-user")).to_contain_text("please help")
    await expect(conversation.locator(".turn-user .channel")).to_contain_text("web")
    await expect(conversation).to_contain_text("Result of list_dlq_events")
    await expect(conversation).to_contain_text("evt_1004")
    await expect(conversation.locator(".turn.current")).to_contain_text("Tool call: replay_dlq_event")

    await page.get_by_role("button", name="Approve", exact=True).click()

    state = page.locator("#detail-state")
    await expect(state).to_contain_text("You approved this call.")
    await expect(state).to_contain_text("Run completed.")
    await expect(state.locator(".output")).to_contain_text('"event_id": "evt_1001"')
    await expect(page.locator(".call-link")).to_have_count(0)
    await expect(conversation).to_contain_text("Result of replay_dlq_event")
    decision = page.locator("#decisions .decision").first
    await expect(decision).to_contain_text("Approved replay_dlq_event by alice")

    decided = await inbox.pending(pending["correlation_id"])
    assert decided["status"] == "approved"
    assert (await inbox.run(pending["run_id"]))["status"] == "completed"


async def test_deny_with_a_reason(inbox: InboxApp) -> None:
    page = await inbox.signed_in(await inbox.keys.make("operator", "default", name="alice"))
    pending = await inbox.suspend(REPLAY)
    await call_item(page, "replay_dlq_event").click()
    await expect(page.locator("#detail-title")).to_have_text("replay_dlq_event")

    await page.get_by_text("Deny…").click()
    deny = page.get_by_role("button", name="Deny", exact=True)
    await deny.click()  # no reason yet: the form refuses to send
    assert (await inbox.pending(pending["correlation_id"]))["status"] == "awaiting"
    await page.get_by_label("Reason (the agent is told)").fill("not during the change freeze")
    await deny.click()

    state = page.locator("#detail-state")
    await expect(state).to_contain_text("You denied this call. Reason: “not during the change freeze”.")
    await expect(state).to_contain_text("Run completed.")
    await expect(state.locator(".output")).to_contain_text("APPROVAL_DENIED")
    latest = page.locator("#decisions .decision").first
    await expect(latest).to_contain_text("Denied replay_dlq_event by alice")
    await expect(latest).to_contain_text("“not during the change freeze”")

    denied = await inbox.pending(pending["correlation_id"])
    assert (denied["status"], denied["reason"]) == ("denied", "not during the change freeze")


async def test_ask_for_a_revision_and_the_model_proposes_a_revised_call(inbox: InboxApp) -> None:
    page = await inbox.signed_in(await inbox.keys.make("operator", "default", name="alice"))
    pending = await inbox.suspend(REVISE)
    await call_item(page, "evt_1001").click()
    await expect(page.locator("#detail-title")).to_have_text("replay_dlq_event")

    await page.get_by_text("Ask for a revision…").click()
    send = page.get_by_role("button", name="Ask for a revision", exact=True)
    await send.click()  # no notes yet: the form refuses to send
    assert (await inbox.pending(pending["correlation_id"]))["status"] == "awaiting"
    await page.get_by_label("Notes for a revised call").fill("replay evt_1002 instead")
    await send.click()

    state = page.locator("#detail-state")
    await expect(state).to_contain_text(
        "You sent this call back for a revision. Notes: “replay evt_1002 instead”."
    )
    await expect(state).to_contain_text("The run waits for 1 more decision; see the list.")
    latest = page.locator("#decisions .decision").first
    await expect(latest).to_contain_text("Revision asked replay_dlq_event by alice")
    await expect(latest).to_contain_text("“replay evt_1002 instead”")
    # The first call left the list; the model's revised call is there instead.
    await expect(page.locator(".call-link")).to_have_count(1)
    await expect(call_item(page, "evt_1001")).to_have_count(0)
    await expect(call_item(page, "Replay DLQ event evt_1002")).to_have_count(1)

    revised = await inbox.pending(pending["correlation_id"])
    assert (revised["status"], revised["reason"]) == ("revision_requested", "replay evt_1002 instead")
    audit = await inbox.http.get(
        "/v1/audit",
        params={"correlation_id": pending["correlation_id"], "action": "pending.revision_requested"},
    )
    [row] = audit.json()["items"]
    assert (row["actor_name"], row["details"]["reason"]) == ("alice", "replay evt_1002 instead")

    # What the model was told, as the tool result of the call sent back.
    conversation = await inbox.http.get(f"/v1/conversations/{pending['conversation_id']}")
    [content] = [
        part["content"]
        for message in conversation.json()["messages"]
        for part in message["message"]["parts"]
        if part["part_kind"] == "tool-return" and part["tool_call_id"] == pending["tool_call_id"]
    ]
    told = json.loads(content)
    assert told["ok"] is False
    assert told["error"]["code"] == "REVISION_REQUESTED"
    assert "Notes: replay evt_1002 instead." in told["error"]["message"]
    run = await inbox.run(pending["run_id"])
    [again] = run["pending"]
    assert (run["status"], again["args_summary"]["event_id"]) == ("suspended", "evt_1002")


async def test_edited_arguments_are_checked_before_sending_and_field_errors_show_inline(
    inbox: InboxApp,
) -> None:
    page = await inbox.signed_in(await inbox.keys.make("operator", "default"))
    pending = await inbox.suspend(TRIAGE)
    await call_item(page, "triage_cluster").click()
    await page.get_by_text("Approve with edited arguments…").click()
    editor = page.get_by_label("Arguments (JSON object)")
    assert json.loads(await editor.input_value()) == {
        "cluster_id": "clu_webhook_timeout",
        "status": "wait",
        "notes": "partner fix pending",
    }
    send = page.get_by_role("button", name="Approve with these arguments")
    errors = page.locator("#edit-errors")

    await editor.fill('{"cluster_id": "clu_webhook_timeout", "status": ')
    await expect(errors).to_contain_text("Not valid JSON")
    await send.click()
    await expect(editor).to_have_attribute("aria-invalid", "true")
    assert (await inbox.pending(pending["correlation_id"]))["status"] == "awaiting"

    invalid = {"cluster_id": "clu_webhook_timeout", "status": "someday", "notes": "later"}
    await editor.fill(json.dumps(invalid))
    await expect(errors).to_be_empty()
    await send.click()
    await expect(errors).to_contain_text("status: Input should be 'dismissed', 'escalate' or 'wait'")
    await expect(editor).to_have_attribute("aria-invalid", "true")
    await expect(editor).to_be_focused()
    assert (await inbox.pending(pending["correlation_id"]))["status"] == "awaiting"

    await editor.fill(json.dumps({**invalid, "status": "escalate"}))
    await send.click()
    state = page.locator("#detail-state")
    await expect(state).to_contain_text("You approved this call with edited arguments.")
    await expect(state).to_contain_text("Run completed.")
    approved = await inbox.pending(pending["correlation_id"])
    assert approved["edited_args"] == {**invalid, "status": "escalate"}


async def test_two_operators_decide_the_same_call_and_the_loser_sees_who_won(inbox: InboxApp) -> None:
    pending = await inbox.suspend(REPLAY)
    alice = await inbox.signed_in(await inbox.keys.make("operator", "default", name="alice"))
    # Bob's live stream cannot connect, so nothing tells his page the call was decided.
    bob = await inbox.page(block_stream=True)
    await bob.get_by_label("Operator key").fill(await inbox.keys.make("operator", "default", name="bob"))
    await bob.get_by_role("button", name="Sign in").click()
    await expect(bob.locator("#live")).to_have_text("Reconnecting…")
    carol = await inbox.signed_in(await inbox.keys.make("operator", "default", name="carol"))
    for page in (alice, bob, carol):
        await call_item(page, "replay_dlq_event").click()
        await expect(page.locator("#detail-title")).to_have_text("replay_dlq_event")

    await alice.get_by_role("button", name="Approve", exact=True).click()
    await expect(alice.locator("#detail-state")).to_contain_text("You approved this call.")

    await bob.get_by_role("button", name="Approve", exact=True).click()
    await expect(bob.locator("#detail-state")).to_contain_text(
        re.compile(r"Already decided by alice: approved at .+\.")
    )
    await expect(bob.get_by_role("button", name="Approve", exact=True)).to_be_hidden()
    await expect(bob.locator(".call-link")).to_have_count(0)
    await expect(bob.locator("#decisions .decision").first).to_contain_text(
        "Approved replay_dlq_event by alice"
    )
    await bob.screenshot(path=str(artifact("inbox-already-decided.png")), full_page=True)

    # Carol's page heard of it live: the call left her list and her open view says who decided.
    await expect(carol.locator("#detail-state")).to_contain_text("Already decided by alice: approved")
    await expect(carol.locator(".call-link")).to_have_count(0)
    assert (await inbox.pending(pending["correlation_id"]))["status"] == "approved"


async def test_filters_keyboard_use_and_screenshots_of_two_pending_calls(inbox: InboxApp) -> None:
    key = await inbox.keys.make("operator", "default", name="alice")
    await inbox.suspend(REPLAY)
    await inbox.suspend(TRIAGE)
    page = await inbox.page()

    # Keyboard only: the key field has the focus, Enter signs in.
    await expect(page.get_by_label("Operator key")).to_be_focused()
    await page.keyboard.type(key)
    await page.keyboard.press("Enter")
    await expect(page.locator("#live")).to_have_text("Live")
    items = page.locator(".call-link")
    await expect(items).to_have_count(2)
    await expect(items.first).to_contain_text("triage_cluster")  # newest first

    shot = artifact("inbox-two-pending.png")
    await page.screenshot(path=str(shot), full_page=True)
    narrow = await inbox.signed_in(key, width=390, height=844)
    await expect(narrow.locator(".call-link")).to_have_count(2)
    narrow_shot = artifact("inbox-two-pending-narrow.png")
    await narrow.screenshot(path=str(narrow_shot), full_page=True)
    assert not await narrow.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    print(f"screenshots: {shot} {narrow_shot}")

    await page.get_by_label("Kind").select_option("elicitation")
    await expect(items).to_have_count(0)
    await expect(page.locator("#list-empty")).to_have_text("No pending call matches the filters.")
    await page.get_by_label("Kind").select_option("approval")
    await page.get_by_label("Tool").fill("replay")
    await expect(items).to_have_count(1)
    await expect(page.locator("#pending-count")).to_have_text("(1 of 2)")

    await tab_to(page, ".call-link")
    outline = await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    await page.keyboard.press("Enter")
    await expect(page.locator("#detail-title")).to_be_focused()
    await expect(page.locator("#detail-title")).to_have_text("replay_dlq_event")
    await expect(page.locator("#conversation .turn.current")).to_be_visible()
    await page.screenshot(path=str(artifact("inbox-open-call.png")), full_page=True)
    await tab_to(page, "#approve-form button")
    await page.keyboard.press("Enter")
    await expect(page.locator("#detail-state")).to_contain_text("Run completed.")

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_label("Operator key")).to_be_focused()
    assert await page.evaluate(f"sessionStorage.getItem('{KEY_STORAGE}')") is None


async def test_answer_a_question_from_the_agent(inbox: InboxApp) -> None:
    page = await inbox.signed_in(await inbox.keys.make("operator", "default"))
    pending = await inbox.suspend(ASK)
    await page.get_by_label("Kind").select_option("elicitation")
    item = call_item(page, "ask_operator")
    await expect(item).to_contain_text("question: Which endpoint should the replays use?")
    await item.click()
    await expect(page.get_by_role("button", name="Approve", exact=True)).to_be_hidden()

    await page.get_by_label("Your answer").fill("the v2 hooks endpoint")
    await page.get_by_role("button", name="Send the answer").click()

    state = page.locator("#detail-state")
    await expect(state).to_contain_text("You answered this call.")
    await expect(state).to_contain_text("Run completed.")
    await expect(state.locator(".output")).to_contain_text("the v2 hooks endpoint")
    assert (await inbox.pending(pending["correlation_id"]))["result"] == "the v2 hooks endpoint"


async def test_keys_that_cannot_decide_are_turned_away(inbox: InboxApp) -> None:
    page = await inbox.page()
    await page.get_by_label("Operator key").fill("srs_not-a-key-anyone-made")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#key-error")).to_have_text("This key was not accepted.")
    await page.get_by_label("Operator key").fill(await inbox.keys.make("user", "default"))
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#key-error")).to_have_text(
        "This is a user key; the inbox needs an operator or admin key."
    )
    assert await page.evaluate(f"sessionStorage.getItem('{KEY_STORAGE}')") is None

    admin = await inbox.keys.make("admin", None, name="root")
    await sign_in(page, admin)
    await expect(page.locator("#who")).to_have_text("root · admin · all workspaces")
    await inbox.suspend(REPLAY, workspace="elsewhere")
    await expect(page.locator(".call-link")).to_contain_text("workspace elsewhere")
    await page.reload()  # the key stays in this tab's session storage
    await expect(page.locator("#who")).to_have_text("root · admin · all workspaces")
    await expect(page.locator(".call-link")).to_have_count(1)


async def test_a_reload_while_the_service_fails_keeps_the_key_and_signs_in_again(inbox: InboxApp) -> None:
    issued = await inbox.keys.issue("operator", "default", name="alice")
    page = await inbox.signed_in(issued.secret)
    stored = f"sessionStorage.getItem('{KEY_STORAGE}')"
    unreachable = page.locator("#unreachable-error")

    async def unavailable(route: Route) -> None:
        problem = {"status": 503, "code": "database_unavailable", "detail": "the database is not reachable"}
        await route.fulfill(status=503, content_type="application/problem+json", body=json.dumps(problem))

    await page.route("**/v1/me", unavailable, times=1)
    await page.reload()
    await expect(unreachable).to_have_text("the database is not reachable")
    await expect(page.locator("#unreachable-next")).to_have_text(
        "The saved key stays in this tab. Next try in 5 s."
    )
    await expect(page.get_by_role("heading", name="Signing in again failed")).to_be_visible()
    await expect(page.get_by_role("heading", name="Awaiting a decision")).to_be_hidden()
    await expect(page.get_by_label("Operator key")).to_be_hidden()
    assert await page.evaluate(stored) == issued.secret
    await expect(page.get_by_role("button", name="Try again")).to_be_focused()
    await page.screenshot(path=str(artifact("inbox-unreachable.png")))
    await page.keyboard.press("Enter")
    await expect(page.locator("#who")).to_have_text("alice · operator · workspace default")
    await expect(page.locator("#live")).to_have_text("Live")
    await expect(page.locator("#unreachable")).to_be_hidden()

    # No answer at all: the page tries again by itself.
    await page.route("**/v1/me", lambda route: route.abort(), times=1)
    await page.reload()
    await expect(unreachable).to_contain_text("The service could not be reached")
    assert await page.evaluate(stored) == issued.secret
    await expect(page.locator("#who")).to_have_text("alice · operator · workspace default")
    assert await page.evaluate(stored) == issued.secret

    # A refused key is forgotten.
    revoked = await inbox.http.delete(f"/v1/keys/{issued.key.id}")
    assert revoked.status_code == 200, revoked.text
    await page.reload()
    await expect(page.locator("#key-error")).to_have_text("This key was not accepted.")
    await expect(page.locator("#unreachable")).to_be_hidden()
    assert await page.evaluate(stored) is None


async def tab_to(page: Page, selector: str, presses: int = 40) -> None:
    """Press Tab until the focus is on an element matching `selector`."""
    for _ in range(presses):
        await page.keyboard.press("Tab")
        if await page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")
