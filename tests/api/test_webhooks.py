"""Webhooks: registration, signed deliveries to a receiver on 127.0.0.1, dead letters and replay."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.domain.clock import utcnow
from sursis.domain.events.webhooks import verify
from sursis.domain.records.event_records import Webhook
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from tests.api.conftest import LiveFactory
from tests.api.http_calls import create_conversation, get_run, post_message, resolve
from tests.api.live import Receiver, serve
from tests.conftest import call, eventually, script

REPLAY_AFTER_LIST = script(
    [call("list_dlq_events")],
    [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
)


def results_of(output: str) -> list[Any]:
    assert output.startswith("RESULTS: "), output
    return list(json.loads(output.removeprefix("RESULTS: ")))


async def test_operators_register_list_and_delete_webhooks(client: AsyncTestClient[Any]) -> None:
    events = ["pending.created", "run.completed"]
    private = await client.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": events})
    assert private.status_code == 422
    assert [e["loc"] for e in private.json()["errors"]] == [["url"]]
    unknown = await client.post(
        "/v1/webhooks", json={"url": "https://hooks.example.com/a", "events": ["message.delta"]}
    )
    assert unknown.status_code == 422
    assert [e["loc"] for e in unknown.json()["errors"]] == [["events"]]

    created = await client.post("/v1/webhooks", json={"url": "https://hooks.example.com/a", "events": events})
    assert created.status_code == 201
    hook = created.json()
    assert hook["secret"].startswith("whsec_")
    assert hook["workspace"] == "default"
    assert hook["events"] == events

    listed = (await client.get("/v1/webhooks")).json()
    assert [w["id"] for w in listed] == [hook["id"]]
    assert "secret" not in listed[0]

    assert (await client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 204
    assert (await client.get("/v1/webhooks")).json() == []
    assert (await client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 404


BAD_URLS = [
    ("http://[::1/x", "is not a valid URL"),
    ("https://hooks.example.com:99999/x", "must have a port between 1 and 65535"),
    ("https://hooks.example.com:0/x", "must have a port between 1 and 65535"),
    ("https://hooks.example.com:port/x", "must have a port between 1 and 65535"),
    ("https://hooks.exa mple.com/x", "must not contain spaces or control characters"),
]


async def test_urls_that_do_not_parse_or_have_no_valid_port_are_422(client: AsyncTestClient[Any]) -> None:
    for url, message in BAD_URLS:
        response = await client.post("/v1/webhooks", json={"url": url, "events": ["run.completed"]})
        assert response.status_code == 422, (url, response.text)
        assert response.json()["errors"] == [{"loc": ["url"], "msg": message}], url
    assert (await client.get("/v1/webhooks")).json() == []


async def store_webhook_unchecked(database_url: str, url: str) -> str:
    """A webhook whose URL was never checked (stored before the checks were what they are now)."""
    engine = create_engine(database_url)
    webhook_id = uuid.uuid4()
    try:
        async with SqlUnitOfWorkFactory(engine)() as uow:
            await uow.webhooks.add(
                Webhook(
                    id=webhook_id,
                    workspace="default",
                    url=url,
                    events=("run.completed",),
                    secret="whsec_test",
                    created_by="test-setup",
                    created_at=utcnow(),
                )
            )
            await uow.commit()
    finally:
        await engine.dispose()
    return f"clu_webhook_{webhook_id.hex[:12]}"


@pytest.mark.parametrize(
    ("allow_private_hosts", "bad_urls"),
    [
        (True, ["http://[::1/x", "http://127.0.0.1:99999/x"]),
        (False, ["https://hooks.example.com:99999/x"]),
    ],
)
async def test_unusable_urls_end_in_dead_letters_without_holding_up_the_others(
    live: LiveFactory, seeded: str, allow_private_hosts: bool, bad_urls: list[str]
) -> None:
    clusters = [await store_webhook_unchecked(seeded, url) for url in bad_urls]
    receiver = Receiver()
    settings = {
        "webhook_allow_private_hosts": allow_private_hosts,
        "webhook_max_attempts": 2,
        "webhook_backoff_seconds": 0.05,
    }
    async with serve(receiver, lifespan="off") as receiver_url, live(**settings) as app:
        if allow_private_hosts:
            created = await app.http.post(
                "/v1/webhooks", json={"url": receiver_url + "/hooks", "events": ["run.completed"]}
            )
            assert created.status_code == 201, created.text
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        await post_message(app.http, cid, script("nothing to do"))  # type: ignore[arg-type]
        if allow_private_hosts:
            await receiver.wait_for(1)
        ops = await create_conversation(app.http)  # type: ignore[arg-type]

        # Listing the dead letters completes runs too, which queues more deliveries: wait until
        # every unusable webhook has at least one.
        async def dead_letters() -> list[Any]:
            listed = await post_message(app.http, ops, script([call("list_dlq_events", status="dead")]))  # type: ignore[arg-type]
            [result] = results_of(listed["output"])
            letters = [e for e in result["result"] if e["topic"] == "webhook:run.completed"]
            return letters if {e["cluster_id"] for e in letters} == set(clusters) else []

        letters = await eventually(dead_letters)

    for letter in letters:
        assert letter["attempts"] == 2
        assert letter["error"], letter
    if allow_private_hosts:
        assert receiver.answered[0] == 200
        assert set(receiver.answered) == {200}


async def test_deliveries_are_signed_and_link_to_the_approval_endpoint(live: LiveFactory) -> None:
    receiver = Receiver()
    async with (
        serve(receiver, lifespan="off") as receiver_url,
        live(webhook_allow_private_hosts=True, public_url="https://sursis.example.com") as app,
    ):
        hook = (
            await app.http.post(
                "/v1/webhooks",
                json={
                    "url": receiver_url + "/hooks/sursis",
                    "events": ["pending.created", "pending.resolved", "run.completed"],
                },
            )
        ).json()
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        run = await post_message(app.http, cid, REPLAY_AFTER_LIST)  # type: ignore[arg-type]
        [pending] = run["pending"]
        await receiver.wait_for(1)
        await resolve(app.http, pending["correlation_id"], decision="approve")  # type: ignore[arg-type]
        await get_run(app.http, run["id"])  # type: ignore[arg-type]
        await receiver.wait_for(3)

    now = int(time.time())
    bodies = []
    for headers, body in receiver.requests:
        assert headers["content-type"] == "application/json"
        assert verify(hook["secret"], headers["sursis-signature"], body, now=now)
        assert not verify(hook["secret"], headers["sursis-signature"], body + b" ", now=now)
        assert not verify("whsec_other", headers["sursis-signature"], body, now=now)
        parsed = json.loads(body)
        assert headers["sursis-event-id"] == str(parsed["id"])
        assert headers["sursis-event-type"] == parsed["type"]
        bodies.append(parsed)
    bodies.sort(key=lambda b: b["id"])
    assert [b["type"] for b in bodies] == ["pending.created", "pending.resolved", "run.completed"]
    assert {b["conversation_id"] for b in bodies} == {cid}
    created, resolved, completed = (b["data"] for b in bodies)
    link = f"https://sursis.example.com/v1/pending/{pending['correlation_id']}"
    assert created["links"] == {"pending": link, "resolve": link + "/resolve"}
    assert created["effect_description"] == "Replay DLQ event evt_1001"
    assert "args" not in created
    assert resolved["status"] == "approved"
    assert completed["run_id"] == run["id"]
    assert len(receiver.requests) == 3


def three_attempts(backoff_seconds: float) -> dict[str, Any]:
    """Settings for a receiver on 127.0.0.1 that is tried three times, `backoff_seconds` apart at first."""
    return {
        "webhook_allow_private_hosts": True,
        "webhook_max_attempts": 3,
        "webhook_backoff_seconds": backoff_seconds,
    }


async def test_a_retry_is_kept_when_the_loop_is_woken_before_it_falls_due(live: LiveFactory) -> None:
    """Other work wakes the delivery loop between a failed attempt and its retry: the pass it makes
    then finds nothing due, and the loop still wakes for the retry instead of sleeping until its
    safety poll (30 s on PostgreSQL, where the process hears the others)."""
    receiver = Receiver(status=500)
    async with serve(receiver, lifespan="off") as receiver_url, live(**three_attempts(2.0)) as app:
        await app.http.post(
            "/v1/webhooks", json={"url": receiver_url + "/hooks", "events": ["run.completed"]}
        )
        first = await create_conversation(app.http)  # type: ignore[arg-type]
        await post_message(app.http, first, script("nothing to do"))  # type: ignore[arg-type]
        await receiver.wait_for(1)
        failed_at = time.monotonic()
        # A run in another conversation that stops at an approval (no run.completed, so nothing
        # to deliver): its commits wake the loop well before the retry (1.6 to 2.4 s after the
        # failure) falls due.
        other = await create_conversation(app.http)  # type: ignore[arg-type]
        gated = script([call("replay_dlq_event", event_id="evt_1001", reason="wake the loops")])
        suspended = await post_message(app.http, other, gated)  # type: ignore[arg-type]
        assert suspended["pending"], suspended
        assert time.monotonic() - failed_at < 1.5, "the second run stopped after the retry fell due"
        await receiver.wait_for(2, within=10.0)
        assert [headers["sursis-delivery-attempt"] for headers, _ in receiver.requests] == ["1", "2"]


async def test_failing_receiver_ends_in_dead_letters_and_ops_replays_it(live: LiveFactory) -> None:
    receiver = Receiver(status=500)
    async with serve(receiver, lifespan="off") as receiver_url, live(**three_attempts(0.05)) as app:
        hook = (
            await app.http.post(
                "/v1/webhooks", json={"url": receiver_url + "/hooks", "events": ["run.completed"]}
            )
        ).json()
        failing = await create_conversation(app.http)  # type: ignore[arg-type]
        await post_message(app.http, failing, script("nothing to do"))  # type: ignore[arg-type]
        await receiver.wait_for(3)
        first_event = json.loads(receiver.requests[0][1])["id"]
        assert receiver.answered == [500, 500, 500]
        receiver.status = 200

        ops = await create_conversation(app.http)  # type: ignore[arg-type]

        async def dead_letters() -> list[Any]:
            listed = await post_message(app.http, ops, script([call("list_dlq_events", status="dead")]))  # type: ignore[arg-type]
            [result] = results_of(listed["output"])
            return [e for e in result["result"] if e["topic"] == "webhook:run.completed"]

        # The receiver counts a request before its 500 is sent, so the last attempt may still be
        # being recorded.
        [letter] = await eventually(dead_letters)
        assert letter["attempts"] == 3
        assert letter["error"].startswith("HTTP 500 from 127.0.0.1")
        assert letter["cluster_id"] == f"clu_webhook_{hook['id'].replace('-', '')[:12]}"

        replay = script([call("replay_dlq_event", event_id=letter["event_id"], reason="receiver fixed")])
        run = await post_message(app.http, ops, replay)  # type: ignore[arg-type]
        [approval] = run["pending"]
        assert approval["tool_name"] == "replay_dlq_event"
        assert approval["effect_description"] == f"Replay DLQ event {letter['event_id']}"
        await resolve(app.http, approval["correlation_id"], decision="approve")  # type: ignore[arg-type]
        done = await get_run(app.http, run["id"])  # type: ignore[arg-type]
        assert results_of(done["output"])[0]["ok"] is True

        async def replayed_delivery() -> list[int]:
            return [
                status
                for (headers, _), status in zip(receiver.requests, receiver.answered, strict=True)
                if headers["sursis-event-id"] == str(first_event)
            ]

        await receiver.wait_for(4)
        for _ in range(100):
            if len(await replayed_delivery()) == 4:
                break
            await receiver.wait_for(len(receiver.requests) + 1)
        remaining = await dead_letters()

    assert await replayed_delivery() == [500, 500, 500, 200]
    assert remaining == []
    replayed_body = next(
        b for h, b in reversed(receiver.requests) if h["sursis-event-id"] == str(first_event)
    )
    headers = next(h for h, b in reversed(receiver.requests) if h["sursis-event-id"] == str(first_event))
    assert verify(hook["secret"], headers["sursis-signature"], replayed_body, now=int(time.time()))
    assert json.loads(replayed_body)["data"]["output"] == "nothing to do"
