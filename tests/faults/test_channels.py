"""Channels end to end with real processes on PostgreSQL, a local Slack Web API and a real SMTP
server: a conversation started in Slack, approved from a Slack button through worker SIGKILLs,
continued over HTTP, and summed up in an email digest."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import sqlalchemy as sa

from sursis.infra.db.engine import create_engine
from tests.api.live import serve
from tests.channels.slack_fake import (
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    TEAM,
    FakeSlack,
    event_body,
    press_body,
    sign,
)
from tests.channels.smtp_fake import Mailbox, bodies, smtp_server
from tests.conftest import call, script
from tests.faults.processes import Cluster, check_invariants, wait_exit

KILLED = -signal.SIGKILL
THREAD = "1700000100.000100"
GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "replayed", text="replay it")


@dataclass
class Setup:
    cluster: Cluster
    slack: FakeSlack
    mailbox: Mailbox
    http: httpx.AsyncClient
    base: str

    async def slack_event(self, body: bytes) -> Any:
        response = await self.http.post(
            f"{self.base}/v1/channels/slack/events",
            content=body,
            headers={"Content-Type": "application/json", **sign(body)},
        )
        assert response.status_code == 200, response.text
        return response.json()

    async def press(self, user: str, correlation_id: str, action: str, ts: str) -> Any:
        body = press_body(user, correlation_id, action, ts)
        response = await self.http.post(
            f"{self.base}/v1/channels/slack/interactions",
            content=body,
            headers={"Content-Type": "application/x-www-form-urlencoded", **sign(body)},
        )
        assert response.status_code == 200, response.text
        return response.json()


@asynccontextmanager
async def channels_cluster(cluster: Cluster, **settings: str) -> AsyncIterator[Setup]:
    fake = FakeSlack()
    async with serve(fake) as slack_url, smtp_server() as (mailbox, smtp_port):
        cluster.settings.update(
            {
                "SURSIS_SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SURSIS_SLACK_BOT_TOKEN": BOT_TOKEN,
                "SURSIS_SLACK_API_URL": slack_url + "/api/",
                "SURSIS_SLACK_AGENT": "ops",
                "SURSIS_CHANNEL_POLL_SECONDS": "0.2",
                "SURSIS_WEBHOOK_TIMEOUT_SECONDS": "1",
                "SURSIS_WEBHOOK_BACKOFF_SECONDS": "0.1",
                "SURSIS_SMTP_HOST": "127.0.0.1",
                "SURSIS_SMTP_PORT": str(smtp_port),
                "SURSIS_SMTP_STARTTLS": "false",
                "SURSIS_SMTP_TIMEOUT_SECONDS": "1",
                "SURSIS_DIGEST_WINDOW_SECONDS": "2",
                "SURSIS_PUBLIC_URL": "https://sursis.example",
                **settings,
            }
        )
        _, base = await cluster.api()
        async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as http:
            yield Setup(cluster, fake, mailbox, http, base)


async def map_operator(setup: Setup, user_id: str) -> str:
    """A new operator key of `default`, mapped to the Slack user; the key's id."""
    issued = await setup.http.post(
        f"{setup.base}/v1/keys", json={"role": "operator", "workspace": "default", "name": f"slack {user_id}"}
    )
    assert issued.status_code == 201, issued.text
    key_id = str(issued.json()["id"])
    mapped = await setup.http.put(
        f"{setup.base}/v1/channels/slack/users/{TEAM}/{user_id}", json={"key_id": key_id}
    )
    assert mapped.status_code == 200, mapped.text
    return key_id


async def until(check: Callable[[], Awaitable[Any]], seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def scalar(database_url: str, sql: str) -> Any:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            return await conn.scalar(sa.text(sql))
    finally:
        await engine.dispose()


def approvals(slack: FakeSlack) -> list[dict[str, Any]]:
    return [m for m in slack.of("chat.postMessage") if m.get("blocks")]


def thread_texts(slack: FakeSlack) -> list[str]:
    return [str(m["text"]) for m in slack.of("chat.postMessage") if m.get("thread_ts") == THREAD]


async def test_slack_approval_through_worker_kills_then_http_then_a_digest(cluster: Cluster) -> None:
    async with channels_cluster(cluster) as setup:
        await map_operator(setup, "U0")  # asks: the requester may not decide its own call
        operator_key = await map_operator(setup, "U1")
        await map_operator(setup, "U2")
        bound = await setup.http.post(
            f"{setup.base}/v1/channels/bindings",
            json={"kind": "email", "email": "ops@example.com", "workspace": "default"},
        )
        assert bound.status_code == 201, bound.text

        # Only the last worker sends email: a digest whose sender is killed while it sends is never
        # sent again (at most once, docs/channels.md), which the workers killed below could do by
        # chance when a digest window ends as they die.
        smtp_host = cluster.settings.pop("SURSIS_SMTP_HOST")
        # The first worker dies right after Slack accepted the approval message, before it is recorded.
        doomed = cluster.worker(crash_at="slack_posted")
        assert (await setup.slack_event(event_body("EvE2E1", "U0", GATED, THREAD)))["outcome"] == "queued"
        assert await wait_exit(doomed, 60) == KILLED
        [approval] = approvals(setup.slack)
        assert approval["channel"] == CHANNEL and approval["thread_ts"] == THREAD

        # The next one finds that message by its delivery id instead of posting it again; it dies in
        # turn when it resumes the run after the press.
        resuming = cluster.worker(crash_at="segment_resumed")
        await until(lambda: scalar(cluster.database_url, "SELECT COUNT(*) FROM slack_posts"))
        assert len(approvals(setup.slack)) == 1
        assert setup.slack.of("conversations.replies")

        blocks = (
            approval["blocks"] if isinstance(approval["blocks"], list) else json.loads(approval["blocks"])
        )
        [actions] = [b for b in blocks if b["type"] == "actions"]
        correlation_id = actions["elements"][0]["value"]
        ts = str(await scalar(cluster.database_url, "SELECT ts FROM slack_posts"))
        assert (await setup.press("U1", correlation_id, "sursis_approve", ts))["outcome"] == "decided"
        assert (await setup.press("U2", correlation_id, "sursis_approve", ts))["outcome"] == "refused"
        assert await wait_exit(resuming, 60) == KILLED
        cluster.settings["SURSIS_SMTP_HOST"] = smtp_host
        cluster.worker()

        await until(lambda: asyncio.sleep(0, "replayed" in thread_texts(setup.slack)), 60)
        # The press acknowledged itself at once; the deliverer's update names the key.
        ack, update = await setup.slack.wait_for("chat.update", 2, within=30)
        assert ack["ts"] == ts and "approved by <@U1>" in ack["text"]
        assert update["ts"] == ts and "approved by slack U1" in update["text"]
        # Ephemeral notices are at least once (docs/channels.md): the worker killed at the resume may
        # have posted U2's before recording it, and the next one posts it again.
        ephemerals = await setup.slack.wait_for("chat.postEphemeral", 1, within=30)
        assert 1 <= len(ephemerals) <= 2, ephemerals
        assert all(e["user"] == "U2" and "already approved" in e["text"] for e in ephemerals), ephemerals
        call_row = (await setup.http.get(f"{setup.base}/v1/pending/{correlation_id}")).json()
        assert call_row["status"] == "approved" and call_row["resolved_by"] == operator_key

        # The same conversation, continued over HTTP: the reply is in the API and in the thread.
        [binding] = [
            b
            for b in (await setup.http.get(f"{setup.base}/v1/channels/bindings")).json()
            if b["kind"] == "slack"
        ]
        conversation_id = binding["conversation_id"]
        posted = await setup.http.post(
            f"{setup.base}/v1/conversations/{conversation_id}/messages",
            params={"wait": 30},
            json={"content": script("answered on the web", text="and now from the web")},
        )
        assert posted.json()["status"] == "completed", posted.text
        reply = posted.json()["output"]
        assert reply == "answered on the web"
        detail = (await setup.http.get(f"{setup.base}/v1/conversations/{conversation_id}")).json()
        channels = [m["channel"] for m in detail["messages"]]
        assert channels[0] == "slack" and channels[-1] == "web"
        await until(lambda: asyncio.sleep(0, reply in thread_texts(setup.slack)), 30)

        # The digest lists what waited, once (within a minute, as the waits above: on a loaded machine a
        # send that outlives the 1-second SMTP timeout is retried after its backoff).
        [digest] = await setup.mailbox.wait_for(1, within=60)
        text, html = bodies(digest)
        assert digest["To"] == "ops@example.com"
        assert "Approval waiting: replay_dlq_event" in text
        assert f"https://sursis.example/inbox/#call={correlation_id}" in html

        audit = (
            await setup.http.get(f"{setup.base}/v1/audit", params={"correlation_id": correlation_id})
        ).json()
        assert [row["action"] for row in audit["items"]].count("pending.approved") == 1
        tool_calls = (await setup.http.get(f"{setup.base}/v1/runs/{call_row['run_id']}/tool-calls")).json()
        assert [t["tool_name"] for t in tool_calls] == ["replay_dlq_event"]
        assert len(approvals(setup.slack)) == 1
        assert setup.slack.refused == []
    counts = await check_invariants(cluster.database_url)
    assert counts["replays"] == 1


async def test_a_worker_killed_mid_digest_never_sends_it_again(cluster: Cluster) -> None:
    async with channels_cluster(cluster) as setup:
        bound = await setup.http.post(
            f"{setup.base}/v1/channels/bindings",
            json={"kind": "email", "email": "ops@example.com", "workspace": "default"},
        )
        assert bound.status_code == 201
        conversation = (await setup.http.post(f"{setup.base}/v1/conversations", json={"agent": "ops"})).json()
        doomed: subprocess.Popen[bytes] = cluster.worker(crash_at="digest_sent")
        posted = await setup.http.post(
            f"{setup.base}/v1/conversations/{conversation['id']}/messages",
            params={"wait": 30},
            json={"content": GATED},
        )
        assert posted.json()["status"] == "suspended"
        await setup.mailbox.wait_for(1, within=30)
        assert await wait_exit(doomed, 30) == KILLED
        cluster.worker()

        async def given_up() -> bool:
            status = await scalar(cluster.database_url, "SELECT status FROM email_digests")
            return status == "unknown"

        await until(given_up, 30)
        await asyncio.sleep(3)  # more windows pass with the second worker running
        assert len(setup.mailbox.messages) == 1
        assert await scalar(cluster.database_url, "SELECT COUNT(*) FROM email_digests") == 1
