"""Attack: an approval consumed twice runs its action twice (a retried request, two replicas of the
agent, a replay). Two consumes sent at once: exactly one gets the approval, the other 409
`already_consumed`; a later one too."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.access import Role
from tests.attacks.approval_request_attacks import DIGEST, approved_request
from tests.attacks.policy_attacks import problem
from tests.conftest import KeyMaker, bearer


async def test_an_approval_is_consumed_once(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    agent = bearer(await keys.make(Role.USER))
    cid = await approved_request(client, agent)
    consume = f"/v1/approvals/{cid}/consume"
    first, second = await asyncio.gather(
        client.post(consume, json={"digest": DIGEST}, headers=agent),
        client.post(consume, json={"digest": DIGEST}, headers=agent),
    )
    assert sorted([first.status_code, second.status_code]) == [200, 409], (first.text, second.text)
    loser = first if first.status_code == 409 else second
    assert loser.json()["code"] == "already_consumed"
    problem(await client.post(consume, json={"digest": DIGEST}, headers=agent), 409, "already_consumed")
    audit = (await client.get(f"/v1/audit?correlation_id={cid}&action=approval.consumed")).json()
    assert len(audit["items"]) == 1
