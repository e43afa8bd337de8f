"""What the attacks on filed approval requests share: a filing, and a request filed and approved."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.sanitize import args_hash

ARGS = {"account": "acme", "amount": 5000}
DIGEST = args_hash("wire_money", ARGS)
FILING = {"tool_name": "wire_money", "args": ARGS, "agent": "billing-bot", "expires_in_seconds": 600}


async def approved_request(client: AsyncTestClient[Any], agent: dict[str, str]) -> str:
    """A request the agent filed and an operator (the client's admin key) approved: its correlation id."""
    filed = await client.post("/v1/approvals", json=FILING, headers=agent)
    assert filed.status_code == 201, filed.text
    cid: str = filed.json()["correlation_id"]
    decided = await client.post(f"/v1/pending/{cid}/resolve", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    return cid
