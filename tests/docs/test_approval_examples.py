"""The worked examples of docs/approvals.md and docs/reviewer.md (```json policy-example NAME```): each is stored with
`PUT /v1/policies` over the real app and exercised with an agent whose tools are `refund` and
`deploy`, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.domain.policy_decisions import ApprovalRoute, Escalation, TimeoutOutcome
from sursis.testing import ScriptedModel
from tests.conftest import KeyMaker, bearer, make_settings
from tests.docs.examples import REPO
from tests.integration.policy_kit import RAN, shop_agent

FENCE = re.compile(r"^```json policy-example (\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
EXAMPLES = {
    name: json.loads(body)
    for page in ("approvals.md", "reviewer.md")
    for name, body in FENCE.findall((REPO / "docs" / page).read_text())
}


def test_the_three_worked_examples_are_found() -> None:
    assert sorted(EXAMPLES) == ["deploy", "escalate", "refunds", "shell"]


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def shop(
    database_url: str, keys: KeyMaker, model: ScriptedModel
) -> AsyncIterator[AsyncTestClient[Any]]:
    from sursis.app.container import build_container

    settings = make_settings(database_url)
    container = build_container(settings, agents=lambda _uow: {"shop": shop_agent()}, model=model.model)
    async with AsyncTestClient(app=create_app(settings, container=container)) as client:
        client.headers.update(bearer(await keys.make("admin", "default")))
        yield client


async def turn(client: AsyncTestClient[Any], model: ScriptedModel, *calls: tuple[str, dict[str, Any]]) -> Any:
    model.calls(*calls).text("done")
    conversation = (await client.post("/v1/conversations", json={"agent": "shop"})).json()["id"]
    posted = await client.post(
        f"/v1/conversations/{conversation}/messages", params={"wait": 10}, json={"content": "go"}
    )
    assert posted.status_code in (200, 202), posted.text
    return posted.json()


async def store(client: AsyncTestClient[Any], name: str) -> None:
    stored = await client.put("/v1/policies", json=EXAMPLES[name])
    assert stored.status_code == 200, stored.text


def route(pending: dict[str, Any]) -> ApprovalRoute:
    return ApprovalRoute.from_json(pending["policy"]["route"])


async def test_refunds_over_500_go_to_finance(shop: AsyncTestClient[Any], model: ScriptedModel) -> None:
    RAN.clear()
    await store(shop, "refunds")
    run = await turn(
        shop, model, ("refund", {"order_id": "a", "amount": 80}), ("refund", {"order_id": "b", "amount": 501})
    )
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    assert pending["args_summary"]["amount"] == 501
    assert pending["policy"]["rule"] == "big-refunds"
    assert route(pending) == ApprovalRoute(groups=("finance",), quorum=1)
    assert RAN == [("refund", {"order_id": "a", "amount": 80})]


async def test_a_prod_deploy_needs_two_engineers(shop: AsyncTestClient[Any], model: ScriptedModel) -> None:
    RAN.clear()
    await store(shop, "deploy")
    run = await turn(
        shop,
        model,
        ("deploy", {"service": "api", "env": "staging"}),
        ("deploy", {"service": "api", "env": "prod"}),
    )
    [pending] = run["pending"]
    assert pending["args_summary"]["env"] == "prod"
    assert route(pending) == ApprovalRoute(groups=("engineers",), quorum=2)
    # Staging ran at once; the engineers were told after.
    assert RAN == [("deploy", {"service": "api", "env": "staging"})]
    audit = (await shop.get("/v1/audit", params={"action": "policy.notified"})).json()["items"]
    assert [a["details"]["args_summary"]["env"] for a in audit] == ["staging"]


async def test_unanswered_refunds_escalate_to_on_call(
    shop: AsyncTestClient[Any], model: ScriptedModel
) -> None:
    RAN.clear()
    await store(shop, "escalate")
    run = await turn(shop, model, ("refund", {"order_id": "c", "amount": 5}))
    [pending] = run["pending"]
    assert route(pending) == ApprovalRoute(
        groups=("support",),
        remind_after=timedelta(minutes=10),
        escalations=(Escalation(timedelta(minutes=30), ("group:oncall", "slack:#oncall")),),
        timeout=timedelta(hours=4),
        on_timeout=TimeoutOutcome.DENY,
    )
    assert RAN == []


async def test_the_deploy_example_is_decided_by_two_engineers_never_the_requester(
    shop: AsyncTestClient[Any], model: ScriptedModel, keys: KeyMaker
) -> None:
    """The stored policy routes the call; the approver groups decide it: the requester (here an
    engineer too) is refused, an outsider is refused, two engineers approve, and it runs once."""
    RAN.clear()
    await store(shop, "deploy")
    engineers = [await keys.issue("operator", "default", name=f"eng{i}") for i in range(2)]
    outsider = await keys.issue("operator", "default", name="outsider")
    requester = await keys.issue("operator", "default", name="requester")
    members = [str(k.key.id) for k in [*engineers, requester]]
    made = await shop.post(
        "/v1/groups", json={"workspace": "default", "name": "engineers", "members": members}
    )
    assert made.status_code == 201, made.text
    model.calls(("deploy", {"service": "api", "env": "prod"})).text("deployed")
    as_requester = bearer(requester.secret)
    conversation = (await shop.post("/v1/conversations", json={"agent": "shop"}, headers=as_requester)).json()
    posted = await shop.post(
        f"/v1/conversations/{conversation['id']}/messages",
        params={"wait": 10},
        json={"content": "ship it"},
        headers=as_requester,
    )
    [pending] = posted.json()["pending"]
    resolve = f"/v1/pending/{pending['correlation_id']}/resolve"
    approve = {"decision": "approve"}
    refused = await shop.post(resolve, json=approve, headers=as_requester)
    assert (refused.status_code, refused.json()["code"]) == (403, "self_approval")
    refused = await shop.post(resolve, json=approve, headers=bearer(outsider.secret))
    assert (refused.status_code, refused.json()["code"]) == (403, "not_an_approver")
    first = await shop.post(resolve, json=approve, headers=bearer(engineers[0].secret))
    assert first.status_code == 200, first.text
    assert (first.json()["status"], first.json()["still_needed"]) == ("awaiting", 1)
    assert RAN == []
    second = await shop.post(resolve, json=approve, params={"wait": 10}, headers=bearer(engineers[1].secret))
    assert second.status_code == 200, second.text
    decided = (await shop.get(f"/v1/pending/{pending['correlation_id']}")).json()
    assert (decided["status"], decided["still_needed"]) == ("approved", 0)
    assert sorted(v["approver"] for v in decided["votes"]) == sorted(str(k.key.id) for k in engineers)
    run = (await shop.get(f"/v1/runs/{pending['run_id']}", params={"wait": 10})).json()
    assert run["status"] == "completed", run
    assert RAN == [("deploy", {"service": "api", "env": "prod"})]
