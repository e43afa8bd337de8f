"""Driving `POST /v1/agents/{name}/ag-ui` through the real app, and reading its AG-UI events."""

from __future__ import annotations

import json
import uuid
from typing import Any

from litestar.testing import AsyncTestClient

from tests.conftest import call, script

REPLAY = script([call("replay_dlq_event", event_id="evt_1001", reason="partner is back")], "replayed")


def run_input(
    thread: str, text: str | None = None, resume: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"threadId": thread, "runId": str(uuid.uuid4()), "messages": []}
    if text is not None:
        body["messages"] = [{"id": str(uuid.uuid4()), "role": "user", "content": text}]
    if resume is not None:
        body["resume"] = resume
    return body


def events_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]


async def ag_ui(
    client: AsyncTestClient[Any],
    body: dict[str, Any],
    agent: str = "ops",
    headers: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    response = await client.post(f"/v1/agents/{agent}/ag-ui", json=body, headers=headers or {})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return events_of(response.text)


def approve(interrupt: dict[str, Any], **payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True, **payload}}


def deny(interrupt: dict[str, Any], reason: str) -> dict[str, Any]:
    return {
        "interruptId": interrupt["id"],
        "status": "resolved",
        "payload": {"approved": False, "reason": reason},
    }
