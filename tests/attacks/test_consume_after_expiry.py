"""Attack: an approval kept past its expiry and consumed later (a stale agent, a replayed request)
acts on a decision made for another moment. Past its expiry the approval is refused, and the
request, never consumed, shows as abandoned."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.access import Role
from tests.attacks.approval_request_attacks import DIGEST, approved_request, expire
from tests.attacks.policy_attacks import problem
from tests.conftest import KeyMaker, bearer


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
