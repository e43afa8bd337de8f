"""A route's reviewer over HTTP: stored and shown with the rule, refused with a problem when it is
not one (422, nothing stored), and the simulation's `reviewer_model` checked at the edge."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.api.test_policies_api import problem

REVIEWER = {"model": "scripted", "question": "Could this replay change production?", "acts": "approve"}


def policy(reviewer: dict[str, Any], effect: str = "ask", **route: Any) -> dict[str, Any]:
    return {
        "rules": [
            {
                "id": "replays",
                "effect": effect,
                "tools": ["replay_dlq_event"],
                "route": {**route, "reviewer": reviewer},
            }
        ]
    }


async def test_a_reviewer_is_stored_and_shown(client: AsyncTestClient[Any]) -> None:
    stored = await client.put("/v1/policies", json=policy(REVIEWER))
    assert stored.status_code == 200, stored.text
    shown = (await client.get("/v1/policies")).json()["rules"][0]["route"]["reviewer"]
    assert shown == {**REVIEWER, "history": 0, "timeout_seconds": 30.0}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (policy(REVIEWER, effect="notify"), "invalid_policy"),
        (policy({**REVIEWER, "acts": "vote"}), "invalid_policy"),  # a vote needs approver groups
        # On a quorum-1 route a vote approves alone: `approve` says so.
        (policy({**REVIEWER, "acts": "vote"}, groups=["ops"], quorum=1), "invalid_policy"),
        # A model this service cannot build would leave every review to people with `error`.
        (policy({**REVIEWER, "model": "no-such-provider:model"}), "invalid_policy"),
        (policy({**REVIEWER, "acts": "deny"}), "validation_failed"),
        (policy({**REVIEWER, "question": ""}), "validation_failed"),
        (policy({**REVIEWER, "history": 21}), "validation_failed"),
        (policy({**REVIEWER, "model": "bad name with spaces"}), "validation_failed"),
        (policy({**REVIEWER, "extra": 1}), "validation_failed"),
    ],
)
async def test_a_bad_reviewer_is_refused(
    client: AsyncTestClient[Any], body: dict[str, Any], code: str
) -> None:
    problem(await client.put("/v1/policies", json=body), 422, code)
    assert (await client.get("/v1/policies")).json()["version"] is None


async def test_a_voting_reviewer_on_a_quorum_2_route_is_stored(client: AsyncTestClient[Any]) -> None:
    stored = await client.put(
        "/v1/policies", json=policy({**REVIEWER, "acts": "vote"}, groups=["ops"], quorum=2)
    )
    assert stored.status_code == 200, stored.text


async def test_an_unbuildable_reviewer_model_is_named(client: AsyncTestClient[Any]) -> None:
    body = problem(
        await client.put("/v1/policies", json=policy({**REVIEWER, "model": "no-such-provider:model"})),
        422,
        "invalid_policy",
    )
    [error] = body["errors"]
    assert error["loc"] == ["rules", "0", "route", "reviewer", "model"]
    assert "cannot build the model" in error["msg"] and "no-such-provider:model" in error["msg"]


async def test_the_simulation_takes_a_reviewer_model(client: AsyncTestClient[Any]) -> None:
    body = {
        **policy(REVIEWER),
        "since": "2026-01-01T00:00:00Z",
        "reviewer_model": "scripted",
        "max_reviews": 5,
    }
    simulated = await client.post("/v1/policies/simulate", json=body)
    assert simulated.status_code == 200, simulated.text
    assert simulated.json()["reviewer"] is None  # no recorded call was asked
    problem(
        await client.post("/v1/policies/simulate", json={**body, "max_reviews": 501}),
        422,
        "validation_failed",
    )
