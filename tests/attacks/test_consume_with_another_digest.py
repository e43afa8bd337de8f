"""Attack: an agent approved to wire 5000 presents the digest of another action (the same tool with
other arguments) to consume the approval, hoping to run what nobody approved. The consume is bound
to the digest the deciders saw: refused, and the approval stays unconsumed for the real action."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.access import Role
from sursis.domain.sanitize import args_hash
from tests.attacks.approval_request_attacks import DIGEST, approved_request
from tests.attacks.policy_attacks import problem
from tests.conftest import KeyMaker, bearer


async def test_another_digest_does_not_consume_the_approval(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    agent = bearer(await keys.make(Role.USER))
    cid = await approved_request(client, agent)
    other = args_hash("wire_money", {"account": "mallory", "amount": 5000})
    refused = problem(
        await client.post(f"/v1/approvals/{cid}/consume", json={"digest": other}, headers=agent),
        409,
        "digest_mismatch",
    )
    assert refused["digest"] == DIGEST
    assert (await client.get(f"/v1/approvals/{cid}", headers=agent)).json()["consumed_at"] is None
    consumed = await client.post(f"/v1/approvals/{cid}/consume", json={"digest": DIGEST}, headers=agent)
    assert consumed.status_code == 200, consumed.text


async def test_another_key_cannot_consume_it(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    agent = bearer(await keys.make(Role.USER))
    cid = await approved_request(client, agent)
    thief = bearer(await keys.make(Role.USER))
    problem(
        await client.post(f"/v1/approvals/{cid}/consume", json={"digest": DIGEST}, headers=thief),
        403,
        "not_requester",
    )
    seen = (await client.get(f"/v1/approvals/{cid}", headers=thief)).json()
    assert (seen["state"], seen["approved_args"], seen["pending"]["args"]) == ("approved", None, None)
