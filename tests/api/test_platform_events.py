"""`POST /v1/events`: domain events from a `system` key start conversations of the customer agent."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.container import Container
from sursis.app.schemas.platform_events import EventIn, platform_event
from sursis.domain.access import Role
from sursis.domain.customer.intake import EventIntakeService
from sursis.domain.records import Principal
from sursis.infra.db import customer_tables as c
from sursis.infra.db import tables as t
from sursis.infra.db.uow import SqlUnitOfWork
from tests.api.http_calls import get_run
from tests.conftest import KeyMaker, bearer, new_id
from tests.customer_scripts import findings, results


def scan_completed(event_id: str, scan_id: str = "scan_201", verdict: str = "fail") -> dict[str, Any]:
    return {
        "id": event_id,
        "type": "scan.completed",
        "occurred_at": "2026-11-25T06:00:00Z",
        "data": {
            "scan": {
                "id": scan_id,
                "status": "completed",
                "verdict": verdict,
                "scores": {"faithfulness": 0.55, "relevance": 0.9},
                "changeset": {"commit": "f00ba47", "summary": "Shorter answers"},
                "failures": [{"test": "refunds", "error": "cites a policy not in the sources"}],
            }
        },
    }


async def system_headers(keys: KeyMaker, workspace: str = "default") -> dict[str, str]:
    return bearer(await keys.make(Role.SYSTEM, workspace))


async def post_event(client: AsyncTestClient[Any], headers: dict[str, str], body: Any) -> Any:
    return await client.post("/v1/events", json=body, headers=headers)


async def listed(client: AsyncTestClient[Any]) -> list[dict[str, Any]]:
    response = await client.get("/v1/conversations")
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def test_a_completed_scan_starts_a_conversation_with_a_verdict_summary(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    system = await system_headers(keys)
    event_id = new_id()
    response = await post_event(client, system, scan_completed(event_id))

    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["duplicate"] is False
    assert accepted["type"] == "scan.completed"
    run = await get_run(client, accepted["run_id"])
    assert run["status"] == "completed", run
    [summary] = results(run["output"])
    specialist, [detail] = findings(summary)
    assert specialist == "scan-analyst"
    assert detail["result"]["scan_id"] == "scan_201"
    assert detail["result"]["verdict"] == "fail"
    assert detail["result"]["failures"] == [{"test": "refunds", "error": "cites a policy not in the sources"}]

    [started] = [c for c in await listed(client) if c["id"] == accepted["conversation_id"]]
    assert started["initiator"] == "system"
    assert started["agent"] == "customer"
    assert started["event"] == {"id": event_id, "type": "scan.completed"}
    user = bearer(await keys.make(Role.USER))
    seen = await client.get(f"/v1/conversations/{accepted['conversation_id']}", headers=user)
    assert seen.status_code == 200
    assert [c["id"] for c in (await client.get("/v1/conversations", headers=user)).json()["items"]] == [
        accepted["conversation_id"]
    ]


async def test_the_same_event_id_twice_has_one_effect(
    client: AsyncTestClient[Any], keys: KeyMaker, container: Container
) -> None:
    system = await system_headers(keys)
    body = scan_completed(new_id())
    first = await post_event(client, system, body)
    again = await post_event(client, system, {**body, "data": scan_completed("x", verdict="pass")["data"]})

    assert first.status_code == 202
    assert again.status_code == 200, again.text
    assert again.json()["duplicate"] is True
    assert again.json()["conversation_id"] == first.json()["conversation_id"]
    assert again.json()["run_id"] == first.json()["run_id"]
    assert len(await listed(client)) == 1
    async with container.uow() as uow:
        assert await uow.customer.count_events("default") == 1
        scan = await uow.customer.get_scan("default", "scan_201")
    assert scan is not None
    assert scan["verdict"] == "fail"


async def test_anomalies_and_config_changes_go_to_their_specialists(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    system = await system_headers(keys)
    anomaly = await post_event(
        client,
        system,
        {
            "id": new_id(),
            "type": "anomaly.detected",
            "data": {"kind": "cost_spike", "metric": "judge_cost_usd", "baseline": 4.0, "observed": 19.5},
        },
    )
    changed = await post_event(
        client,
        system,
        {
            "id": new_id(),
            "type": "workspace.config_changed",
            "data": {"old": {"score_threshold": 0.75}, "new": {"score_threshold": 0.6}},
        },
    )
    investigation = await get_run(client, anomaly.json()["run_id"])
    specialist, [health, errors] = findings(results(investigation["output"])[0])
    assert specialist == "troubleshooter"
    assert health["result"]["recent_errors"] >= 1
    assert errors["result"][0]["message"] == "cost_spike on judge_cost_usd: observed 19.5, baseline 4.0"
    review = await get_run(client, changed.json()["run_id"])
    specialist, [config, _rubrics] = findings(results(review["output"])[0])
    assert specialist == "framework-advisor"
    assert config["result"]["config"] == {"score_threshold": 0.6}
    unchanged = await post_event(
        client,
        system,
        {"id": new_id(), "type": "workspace.config_changed", "data": {"old": {"a": 1}, "new": {"a": 1}}},
    )

    assert unchanged.status_code == 202
    assert unchanged.json()["conversation_id"] is None
    assert {c["event"]["type"] for c in await listed(client) if c["event"]} == {
        "anomaly.detected",
        "workspace.config_changed",
    }


@pytest.mark.parametrize(
    "body",
    [
        {"id": "e1", "type": "scan.exploded", "data": {}},
        {"id": "e1", "type": "scan.completed", "data": {"scan": {"id": "s", "status": "weird"}}},
        {"id": "", "type": "anomaly.detected", "data": {}},
        {
            "id": "e1",
            "type": "anomaly.detected",
            "data": {"kind": "cost_spike", "metric": "m", "baseline": "x"},
        },
        {"id": "e1", "type": "workspace.config_changed", "data": {"old": {}}},
        {"id": "e1", "type": "scan.completed", "data": {"scan": {"id": "s", "status": "completed"}}, "x": 1},
        [1, 2],
    ],
)
async def test_a_malformed_event_is_refused_and_changes_nothing(
    client: AsyncTestClient[Any], keys: KeyMaker, container: Container, body: Any
) -> None:
    response = await post_event(client, await system_headers(keys), body)

    assert response.status_code in (400, 422), response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"]
    async with container.uow() as uow:
        assert await uow.customer.count_events("default") == 0
    assert await listed(client) == []


async def test_a_system_key_may_only_post_events(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    system = await system_headers(keys)
    accepted = (await post_event(client, system, scan_completed(new_id()))).json()

    for method, path, body in [
        ("GET", "/v1/conversations", None),
        ("GET", f"/v1/conversations/{accepted['conversation_id']}", None),
        ("POST", "/v1/conversations", {"agent": "customer"}),
        ("POST", f"/v1/conversations/{accepted['conversation_id']}/messages", {"content": "hi"}),
        ("GET", f"/v1/runs/{accepted['run_id']}", None),
        ("GET", "/v1/pending", None),
        ("GET", "/v1/audit", None),
    ]:
        response = await client.request(method, path, json=body, headers=system)
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["code"] == "forbidden"
    user = bearer(await keys.make(Role.USER))
    refused = await post_event(client, user, scan_completed(new_id()))
    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"


async def test_an_event_for_another_workspace_is_not_found(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    body = {**scan_completed(new_id()), "workspace": "other"}
    response = await post_event(client, await system_headers(keys), body)
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


class FailingRows(SqlUnitOfWork):
    """A real unit of work whose domain rows fail to write: the transaction must leave nothing."""

    async def __aenter__(self) -> FailingRows:
        await super().__aenter__()

        async def fail(*_: Any) -> None:
            raise RuntimeError("disk full")

        self.customer.add_errors = fail  # type: ignore[method-assign]
        return self


async def test_a_failure_inside_the_transaction_leaves_nothing(container: Container) -> None:
    factory = container.uow
    intake = EventIntakeService(lambda: FailingRows(factory._sessions), container.notifier)
    system = Principal(id="sys", role=Role.SYSTEM, workspace="default")
    event = platform_event(EventIn.model_validate(scan_completed(new_id())), "default")

    with pytest.raises(RuntimeError, match="disk full"):
        await intake.receive(system, event)

    async with factory() as uow:
        for table in (c.platform_events, t.conversations, t.runs):
            count = (await uow.session.execute(sa.select(sa.func.count()).select_from(table))).scalar()
            assert count == 0, table.name
        assert await uow.customer.get_scan("default", "scan_201") is None


async def test_an_admin_posts_to_the_workspace_the_body_names(client: AsyncTestClient[Any]) -> None:
    body = {**scan_completed(new_id()), "workspace": "elsewhere"}
    response = await client.post("/v1/events", json=body)

    assert response.status_code == 202, response.text
    assert response.json()["workspace"] == "elsewhere"
    listed = (await client.get("/v1/conversations", params={"workspace": "elsewhere"})).json()["items"]
    assert [c["id"] for c in listed] == [response.json()["conversation_id"]]
    assert (await client.get("/v1/conversations")).json()["items"] == []


async def test_every_other_v1_route_refuses_a_system_key(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    from tests.api.test_authorization_matrix import BODIES, ROUTES, make_objects

    objects = await make_objects(client, keys)
    objects.ids["own_elicitation_id"] = objects.ids["elicitation_id"]
    system = await system_headers(keys)
    got = {}
    for route in ROUTES:
        body = BODIES.get(route.label)
        response = await client.request(
            route.method,
            route.path.format(**objects.ids),
            json=body(objects) if body else None,
            headers=system,
        )
        got[route.label] = response.status_code
    allowed = {"GET /v1/me": 200, "POST /v1/events": 202}
    assert got == {route.label: allowed.get(route.label, 403) for route in ROUTES}


async def test_conversations_are_paged_with_a_cursor_past_the_first_page(
    client: AsyncTestClient[Any],
) -> None:
    made = [
        (await client.post("/v1/conversations", json={"agent": "ops", "workspace": "paged"})).json()["id"]
        for _ in range(7)
    ]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"workspace": "paged", "limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/conversations", params=params)).json()
        seen += [c["id"] for c in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(seen) == sorted(made)
    assert len(set(seen)) == 7
    bad = await client.get("/v1/conversations", params={"cursor": "bm90IGEgY3Vyc29y"})
    assert bad.status_code == 422, bad.text
