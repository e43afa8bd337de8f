"""What the attacks on filed approval requests share: a filing, a request filed and approved, and
its expiry moved into the past."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.domain.clock import utcnow
from sursis.domain.sanitize import args_hash
from sursis.infra.db.approval_request_tables import approval_requests
from sursis.infra.db.engine import create_engine

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


async def expire(url: str, cid: str) -> None:
    """The request's expiry moved into the past, as if its time had passed."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sa.update(approval_requests)
                .where(approval_requests.c.correlation_id == uuid.UUID(cid))
                .values(expires_at=utcnow() - timedelta(seconds=1))
            )
    finally:
        await engine.dispose()
