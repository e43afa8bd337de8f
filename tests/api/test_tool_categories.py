"""A tool's category is visible wherever its calls are: pending calls, their events, tool-call
records and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.api.http_calls import create_conversation, get_run, post_message, resolve, tool_calls
from tests.conftest import call, script


async def test_pending_calls_and_records_carry_the_tool_s_category(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    run = await post_message(
        client,
        cid,
        script(
            [call("list_dlq_events")],
            [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
        ),
    )
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    assert pending["category"] == "mutate"
    shown = (await client.get(f"/v1/pending/{pending['correlation_id']}")).json()
    assert shown["category"] == "mutate"
    listed = (await client.get("/v1/pending", params={"status": "awaiting"})).json()
    assert [p["category"] for p in listed["items"]] == ["mutate"]

    assert (await resolve(client, pending["correlation_id"], decision="approve")).status_code == 200
    assert (await get_run(client, run["id"]))["status"] == "completed"
    recorded = {t["tool_name"]: t["category"] for t in await tool_calls(client, run["id"])}
    assert recorded == {"list_dlq_events": "read", "replay_dlq_event": "mutate"}


async def test_the_openapi_document_names_the_categories(client: AsyncTestClient[Any]) -> None:
    schema = (await client.get("/schema/openapi.json")).json()
    components = schema["components"]["schemas"]
    assert set(components["Category"]["enum"]) == {"read", "suggest", "mutate"}
    for model in ("PendingCallOut", "ToolCallOut"):
        category = components[model]["properties"]["category"]
        assert {"$ref": "#/components/schemas/Category"} in category["oneOf"], (model, category)
