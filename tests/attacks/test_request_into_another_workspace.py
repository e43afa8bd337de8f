"""Attack: a key of one workspace files a request into another (to borrow its looser policy, or to
land in its inbox), or reads, consumes or decides another workspace's request. The other workspace
does not exist for it: 404, nothing stored."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.access import Role
from tests.attacks.approval_request_attacks import DIGEST, FILING, approved_request
from tests.attacks.policy_attacks import problem
from tests.conftest import KeyMaker, bearer


async def test_a_request_into_another_workspace_is_refused(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    outsider = bearer(await keys.make(Role.USER, workspace="other"))
    problem(
        await client.post("/v1/approvals", json={**FILING, "workspace": "default"}, headers=outsider),
        404,
        "not_found",
    )
    assert (await client.get("/v1/pending?status=all")).json()["items"] == []


async def test_another_workspace_request_is_not_found(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    agent = bearer(await keys.make(Role.USER))
    cid = await approved_request(client, agent)
    outsider = bearer(await keys.make(Role.USER, workspace="other"))
    operator = bearer(await keys.make(Role.OPERATOR, workspace="other"))
    problem(await client.get(f"/v1/approvals/{cid}", headers=outsider), 404, "not_found")
    consume = f"/v1/approvals/{cid}/consume"
    problem(await client.post(consume, json={"digest": DIGEST}, headers=outsider), 404, "not_found")
    problem(
        await client.post(f"/v1/pending/{cid}/resolve", json={"decision": "deny"}, headers=operator),
        404,
        "not_found",
    )
