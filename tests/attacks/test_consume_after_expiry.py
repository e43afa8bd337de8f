"""Attack: an approval kept past its expiry and consumed later (a stale agent, a replayed request)
acts on a decision made for another moment. Past its expiry the approval is refused, and the
request, never consumed, shows as abandoned."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.domain.access import Role
from sursis.domain.clock import utcnow
from sursis.infra.db.approval_request_tables import approval_requests
from sursis.infra.db.engine import create_engine
from tests.attacks.approval_request_attacks import DIGEST, approved_request
from tests.attacks.policy_attacks import problem
from tests.conftest import KeyMaker, bearer


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


async def test_an_expired_approval_is_not_consumed(
    client: AsyncTestClient[Any], keys: KeyMaker, seeded: str
) -> None:
    agent = bearer(await keys.make(Role.USER))
    cid = await approved_request(client, agent)
    await expire(seeded, cid)
    problem(
        await client.post(f"/v1/approvals/{cid}/consume", json={"digest": DIGEST}, headers=agent),
        409,
        "approval_expired",
    )
    seen = (await client.get(f"/v1/approvals/{cid}", headers=agent)).json()
    assert (seen["state"], seen["consumed_at"]) == ("abandoned", None)
