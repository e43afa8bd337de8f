"""A documented promise not kept: `GET /v1/policies?version=N` answered the current version, and
OpenAPI had no such parameter. It answers version N, or 404 for a version never stored."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.attacks.policy_attacks import problem


async def test_a_past_version_is_read_by_its_number(client: AsyncTestClient[Any]) -> None:
    first = {"rules": [{"id": "first", "effect": "allow", "tools": ["list_dlq_events"]}]}
    second = {"rules": [{"id": "second", "effect": "deny", "tools": ["replay_dlq_event"]}]}
    assert (await client.put("/v1/policies", json=first)).json()["version"] == 1
    assert (await client.put("/v1/policies", json=second)).json()["version"] == 2

    old = await client.get("/v1/policies", params={"version": 1})
    assert old.status_code == 200, old.text
    assert (old.json()["version"], [r["id"] for r in old.json()["rules"]]) == (1, ["first"])
    current = (await client.get("/v1/policies")).json()
    assert (current["version"], [r["id"] for r in current["rules"]]) == (2, ["second"])
    problem(await client.get("/v1/policies", params={"version": 9}), 404, "not_found")

    schema = (await client.get("/schema/openapi.json")).json()
    parameters = schema["paths"]["/v1/policies"]["get"]["parameters"]
    assert "version" in {p["name"] for p in parameters}
