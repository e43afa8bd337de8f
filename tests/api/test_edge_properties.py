"""Property: every near-valid variant of a documented `POST /v1/events` example answers 2xx, or a 4xx
problem+json that wrote no row; never a 5xx. (Slack's endpoints: tests/channels/test_slack_properties.py.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.domain.access import Role
from sursis.infra.db import customer_tables as c
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.conftest import KeyMaker, bearer, make_settings
from tests.near_valid import EDGE, Variant, every_variant, near_valid

PROBLEM = "application/problem+json"

# The examples of docs/customer-agent.md, with one value of each alternative.
DOCUMENTED = {
    "scan.completed": {
        "id": "evt-1",
        "type": "scan.completed",
        "occurred_at": "2026-11-25T06:00:00Z",
        "data": {
            "scan": {
                "id": "scan_201",
                "status": "completed",
                "verdict": "fail",
                "scores": {"faithfulness": 0.55},
                "changeset": {"commit": "f00ba47", "summary": "Shorter answers"},
                "failures": [{"test": "refunds", "error": "cites a policy not in the sources"}],
                "completed_at": "2026-11-25T06:00:00Z",
            }
        },
    },
    "anomaly.detected": {
        "id": "evt-2",
        "type": "anomaly.detected",
        "data": {
            "kind": "cost_spike",
            "metric": "judge_cost_usd",
            "baseline": 4.0,
            "observed": 19.5,
            "scan_id": "scan_201",
        },
    },
    "workspace.config_changed": {
        "id": "evt-3",
        "type": "workspace.config_changed",
        "data": {
            "old": {"score_threshold": 0.75},
            "new": {
                "score_threshold": 0.6,
                "rubrics": [{"name": "faithfulness", "description": "...", "threshold": 0.8, "weight": 1.0}],
            },
        },
    },
}
TABLES = (
    c.platform_events,
    c.scans,
    c.rubrics,
    c.framework_configs,
    c.workspace_errors,
    t.conversations,
    t.runs,
    t.events,
)


class Rows:
    """A fingerprint of what the tables an event writes hold: counts, and the rubrics themselves."""

    def __init__(self, database_url: str) -> None:
        self._engine = create_engine(database_url)

    async def snapshot(self) -> tuple[Any, ...]:
        async with self._engine.connect() as conn:
            counts = [await conn.scalar(sa.select(sa.func.count()).select_from(table)) for table in TABLES]
            rubrics = (await conn.execute(sa.select(c.rubrics).order_by(c.rubrics.c.name))).all()
            configs = (await conn.execute(sa.select(c.framework_configs.c.version))).all()
        return (*counts, tuple(map(tuple, rubrics)), tuple(map(tuple, configs)))

    async def close(self) -> None:
        await self._engine.dispose()


@pytest.fixture
async def events_client(seeded: str, keys: KeyMaker) -> AsyncIterator[AsyncTestClient[Any]]:
    """The app without a worker (accepted events' runs stay queued), with a system key."""
    app = create_app(make_settings(seeded, run_worker=False, events_rate_limit_per_minute=0))
    async with AsyncTestClient(app=app) as client:
        client.headers.update(bearer(await keys.make(Role.SYSTEM)))
        yield client


@pytest.fixture
async def rows(seeded: str) -> AsyncIterator[Rows]:
    fingerprint = Rows(seeded)
    yield fingerprint
    await fingerprint.close()


async def check(client: AsyncTestClient[Any], rows: Rows, variant: Variant) -> int:
    before = await rows.snapshot()
    response = await client.post(
        "/v1/events", content=variant.body, headers={"content-type": "application/json"}
    )
    assert response.status_code < 500, (variant, response.text)
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith(PROBLEM), (variant, response.text)
        assert response.json()["status"] == response.status_code
        assert response.json()["code"], response.text
        assert await rows.snapshot() == before, variant
    return response.status_code


FRESH_ID = {("id",): st.uuids().map(lambda u: f"evt-{u}")}


VARIANTS = st.sampled_from(list(DOCUMENTED.values())).flatmap(lambda example: near_valid(example, FRESH_ID))


@EDGE
@given(variant=VARIANTS)
async def test_near_valid_events_are_accepted_or_refused_cleanly(
    events_client: AsyncTestClient[Any], rows: Rows, variant: Variant
) -> None:
    await check(events_client, rows, variant)


async def test_the_documented_examples_themselves_are_accepted(
    events_client: AsyncTestClient[Any], rows: Rows
) -> None:
    import json

    for example in DOCUMENTED.values():
        body = json.dumps({**example, "id": f"evt-{uuid.uuid4()}"}).encode()
        assert await check(events_client, rows, Variant(body, "unchanged")) == 202


@pytest.mark.parametrize("event_type", list(DOCUMENTED))
async def test_each_field_of_each_example_dropped_mistyped_or_mistimed(
    events_client: AsyncTestClient[Any], rows: Rows, event_type: str
) -> None:
    statuses = []
    for variant in every_variant({**DOCUMENTED[event_type], "id": "evt-fresh"}):
        # Each variant under a new id: an accepted one is written, not answered as a duplicate.
        body = variant.body.replace(b'"evt-fresh"', f'"evt-{uuid.uuid4()}"'.encode())
        statuses.append(await check(events_client, rows, Variant(body, variant.change)))
    assert 422 in statuses and (202 in statuses or 200 in statuses), statuses
