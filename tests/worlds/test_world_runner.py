"""`WorldAgentRunner.chat` keeps a session; the ops agent remembers through the same gateway."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.container import Container
from sursis.domain.records import Principal
from sursis.domain.worlds.ports import Caller
from sursis.infra.worlds.runner import WorldNotFound
from tests.conftest import call, script
from tests.worlds.flow import results_of, say

ADMIN = Principal(id="test-admin", role="admin", workspace="default")


async def test_chat_is_stateful_and_ask_is_not(container: Container) -> None:
    world = await container.worlds.service.create_world(ADMIN, "chat", "Chat", None)
    caller = Caller(workspace="default", agent="test")
    session = uuid.uuid4()
    first = await container.worlds.runner.chat(
        script([call("list_rules")]), session_id=session, world_id=world.id, caller=caller
    )
    second = await container.worlds.runner.chat(
        "and again?", session_id=session, world_id=world.id, caller=caller
    )
    assert results_of(first) == [{"ok": True, "result": []}]
    assert second, "the second turn is answered in the same session"
    async with container.uow() as uow:
        messages = await uow.messages.read(session)
    prompts = [m for m in messages if '"user-prompt"' in m.body]
    assert len(prompts) == 2, "both turns are in the one session's log"

    other_workspace = Caller(workspace="elsewhere", agent="test")
    with pytest.raises(WorldNotFound, match="no world"):
        await container.worlds.runner.ask("hello", world_id=world.id, caller=other_workspace)


async def test_the_ops_agent_remembers_through_the_gateway(client: AsyncTestClient[Any]) -> None:
    ops = (await client.post("/v1/conversations", json={"agent": "ops"})).json()["id"]
    run = await say(
        client,
        ops,
        script(
            [
                call(
                    "remember",
                    text="page the partner at ops@partner.example when it fails",
                    kind="preference",
                ),
                call("remember", text="partner webhooks fail on Mondays after deploys", tier="persistent"),
            ],
            [call("recall", query="partner webhooks fail")],
        ),
    )
    assert run["status"] == "completed", run
    calls = (await client.get(f"/v1/runs/{run['id']}/tool-calls")).json()
    # The two `remember` calls of one response run concurrently: their records come in either order.
    remembered = sorted((c["result"] for c in calls if c["tool_name"] == "remember"), key=lambda r: r["ok"])
    [recalled] = (c["result"] for c in calls if c["tool_name"] == "recall")
    refused, kept = remembered
    assert refused["ok"] is False and refused["error"]["code"] == "MEMORY_PERSONAL_DATA"
    assert kept["ok"] is True
    assert [m["text"] for m in recalled["result"]] == ["partner webhooks fail on Mondays after deploys"]
    assert json.dumps(recalled).count("ops@partner.example") == 0
