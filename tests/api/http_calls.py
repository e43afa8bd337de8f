"""Calls to the v1 HTTP API (create, post, resolve, read) shared by the API tests."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient


async def create_conversation(client: AsyncTestClient[Any], agent: str = "ops", **extra: Any) -> str:
    response = await client.post("/v1/conversations", json={"agent": agent, **extra})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def post_message(
    client: AsyncTestClient[Any], conversation_id: str, content: str, wait: float = 10
) -> Any:
    response = await client.post(
        f"/v1/conversations/{conversation_id}/messages", params={"wait": wait}, json={"content": content}
    )
    assert response.status_code in (200, 202), response.text
    return response.json()


async def resolve(client: AsyncTestClient[Any], correlation_id: str, **body: Any) -> Any:
    return await client.post(f"/v1/pending/{correlation_id}/resolve", json=body)


async def get_run(client: AsyncTestClient[Any], run_id: str, wait: float = 10) -> Any:
    response = await client.get(f"/v1/runs/{run_id}", params={"wait": wait})
    assert response.status_code == 200, response.text
    return response.json()


async def tool_calls(client: AsyncTestClient[Any], run_id: str) -> list[Any]:
    response = await client.get(f"/v1/runs/{run_id}/tool-calls")
    assert response.status_code == 200, response.text
    return list(response.json())


async def conversation(client: AsyncTestClient[Any], conversation_id: str) -> Any:
    response = await client.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    return response.json()
