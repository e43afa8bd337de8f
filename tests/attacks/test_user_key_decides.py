"""Attack: the agent's own key decides the request it filed. A `user` key may file, wait, consume
and report, never decide (403); an operator key that filed a request is its
requester and may not approve it either (403 `self_approval`)."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.access import Role
from tests.attacks.approval_request_attacks import FILING
from tests.attacks.policy_attacks import problem
from tests.conftest import KeyMaker, bearer


async def test_a_user_key_does_not_decide(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    agent = bearer(await keys.make(Role.USER))
    cid = (await client.post("/v1/approvals", json=FILING, headers=agent)).json()["correlation_id"]
    resolve = f"/v1/pending/{cid}/resolve"
    problem(await client.post(resolve, json={"decision": "approve"}, headers=agent), 403, "forbidden")
    assert (await client.get(f"/v1/approvals/{cid}", headers=agent)).json()["state"] == "awaiting"


async def test_the_filing_operator_does_not_approve_its_own(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    operator = bearer(await keys.make(Role.OPERATOR))
    cid = (await client.post("/v1/approvals", json=FILING, headers=operator)).json()["correlation_id"]
    problem(
        await client.post(f"/v1/pending/{cid}/resolve", json={"decision": "approve"}, headers=operator),
        403,
        "self_approval",
    )
