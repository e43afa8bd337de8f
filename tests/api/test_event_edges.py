"""`POST /v1/events` on near-valid input: the documented shapes are stored, the rest is a 4xx that
writes nothing, permission comes before the body, and platform bursts have their own limit."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.infra.db import customer_tables as c
from sursis.infra.db.engine import create_engine
from tests.api.test_hostile_input import assert_problem
from tests.conftest import KeyMaker, bearer, make_settings, new_id

DOCUMENTED_SCAN = {
    "id": "evt-doc-1",
    "type": "scan.completed",
    "data": {
        "scan": {
            "id": "scan_201",
            "status": "completed",
            "verdict": "fail",
            "scores": {"faithfulness": 0.55},
            "completed_at": "2026-11-25T06:00:00Z",
        }
    },
}


def config_changed(new: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    return {
        "id": event_id or new_id(),
        "type": "workspace.config_changed",
        "data": {"old": {"score_threshold": 0.75}, "new": new},
    }


async def rows(database_url: str, table: sa.Table, workspace: str = "default") -> list[dict[str, Any]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            result = await conn.execute(sa.select(table).where(table.c.workspace == workspace))
            return [dict(r._mapping) for r in result]
    finally:
        await engine.dispose()


async def test_the_documented_scan_with_completed_at_is_stored_with_its_time(
    client: AsyncTestClient[Any], keys: KeyMaker, seeded: str
) -> None:
    system = bearer(await keys.make(Role.SYSTEM))
    response = await client.post("/v1/events", json=DOCUMENTED_SCAN, headers=system)

    assert response.status_code == 202, response.text
    [scan] = [r for r in await rows(seeded, c.scans) if r["id"] == "scan_201"]
    assert scan["completed_at"] == datetime(2026, 11, 25, 6, tzinfo=UTC)
    again = await client.post("/v1/events", json=DOCUMENTED_SCAN, headers=system)
    assert again.status_code == 200, again.text
    assert again.json()["duplicate"] is True


@pytest.mark.parametrize(
    "completed_at",
    ["2026-11-25T06:00:00", "2026-11-25", "yesterday", "2026-13-40T06:00:00Z", True, [], None],
)
async def test_a_scan_time_without_an_offset_or_malformed_is_refused_and_writes_nothing(
    client: AsyncTestClient[Any], keys: KeyMaker, seeded: str, completed_at: Any
) -> None:
    body = {**DOCUMENTED_SCAN, "id": new_id()}
    body["data"] = {"scan": {**DOCUMENTED_SCAN["data"]["scan"], "id": "scan_naive"}}  # type: ignore[index]
    body["data"]["scan"]["completed_at"] = completed_at
    response = await client.post("/v1/events", json=body, headers=bearer(await keys.make(Role.SYSTEM)))

    if completed_at is None:
        assert response.status_code == 202, response.text
        return
    problem = assert_problem(response, 422, "validation_failed")
    assert ["body", "data", "scan", "completed_at"] in [e["loc"][:4] for e in problem["errors"]]
    assert not [r for r in await rows(seeded, c.scans) if r["id"] == "scan_naive"]


@pytest.mark.parametrize(
    "rubrics",
    [
        "nope",
        {"name": "faithfulness"},
        [{"name": "", "threshold": 5, "weight": -1}],
        [{"name": "x"}],
        [{"name": "x", "threshold": 0.5, "weight": -1}],
        [{"name": "x", "threshold": 0.5, "colour": "red"}],
        [{"name": "x", "threshold": 0.5}, {"name": "x", "threshold": 0.6}],
        [{"name": "x" * 101, "threshold": 0.5}],
        [None],
        None,
    ],
)
async def test_invalid_rubrics_are_refused_and_the_real_ones_stay(
    client: AsyncTestClient[Any], keys: KeyMaker, seeded: str, rubrics: Any
) -> None:
    before = await rows(seeded, c.rubrics)
    assert before, "the demo workspace has rubrics"
    response = await client.post(
        "/v1/events",
        json=config_changed({"score_threshold": 0.5, "rubrics": rubrics}),
        headers=bearer(await keys.make(Role.SYSTEM)),
    )

    problem = assert_problem(response, 422, "validation_failed")
    assert all(e["loc"][:4] == ["body", "data", "new", "rubrics"] for e in problem["errors"]), problem
    assert await rows(seeded, c.rubrics) == before
    assert [r["version"] for r in await rows(seeded, c.framework_configs)] == [1]


async def test_valid_rubrics_replace_the_real_ones_and_a_config_without_them_keeps_them(
    client: AsyncTestClient[Any], keys: KeyMaker, seeded: str
) -> None:
    system = bearer(await keys.make(Role.SYSTEM))
    rubric = {"name": "faithfulness", "description": "stays in the sources", "threshold": 0.8, "weight": 2}
    replaced = await client.post("/v1/events", json=config_changed({"rubrics": [rubric]}), headers=system)
    assert replaced.status_code == 202, replaced.text
    assert [(r["name"], r["threshold"], r["weight"]) for r in await rows(seeded, c.rubrics)] == [
        ("faithfulness", 0.8, 2.0)
    ]

    kept = await client.post("/v1/events", json=config_changed({"score_threshold": 0.9}), headers=system)
    assert kept.status_code == 202, kept.text
    assert [r["name"] for r in await rows(seeded, c.rubrics)] == ["faithfulness"]
    [framework] = await rows(seeded, c.framework_configs)
    assert framework["config"] == {"score_threshold": 0.9}


@pytest.mark.parametrize("role", [Role.USER, Role.OPERATOR])
async def test_a_key_that_may_not_post_events_gets_403_whatever_the_body(
    client: AsyncTestClient[Any], keys: KeyMaker, role: Role
) -> None:
    headers = bearer(await keys.make(role))
    for body in ({"id": "", "type": "nope"}, [1, 2], "not json"):
        response = await client.post("/v1/events", json=body, headers=headers)
        assert_problem(response, 403, "forbidden")
    garbled = await client.post(
        "/v1/events", content=b"\xff{", headers={**headers, "content-type": "application/json"}
    )
    assert_problem(garbled, 403, "forbidden")


async def test_events_have_their_own_rate_limit_with_retry_after(seeded: str, keys: KeyMaker) -> None:
    system = bearer(await keys.make(Role.SYSTEM))
    app = create_app(make_settings(seeded, rate_limit_per_minute=3, events_rate_limit_per_minute=6))
    async with AsyncTestClient(app=app) as client:
        for _ in range(6):
            body = {
                "id": new_id(),
                "type": "anomaly.detected",
                "data": {"kind": "cost_spike", "metric": "judge_cost_usd", "baseline": 4.0, "observed": 19.5},
            }
            accepted = await client.post("/v1/events", json=body, headers=system)
            assert accepted.status_code == 202, accepted.text
        limited = await client.post("/v1/events", json=body, headers=system)
        problem = assert_problem(limited, 429, "rate_limited")
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert problem["retry_after"] == int(limited.headers["retry-after"])


def test_the_default_event_limit_takes_a_burst_of_a_thousand() -> None:
    settings = Settings(database_url="sqlite+aiosqlite://")
    assert settings.events_rate_limit_per_minute >= 1_000 > settings.rate_limit_per_minute
