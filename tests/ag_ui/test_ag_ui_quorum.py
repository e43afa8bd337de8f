"""A call routed to a quorum of approvers, decided from AG-UI front ends: each resume is one vote,
the interrupt stays open until the quorum is met, and a replayed vote counts once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.app.service import Service
from sursis.domain.access import Role
from sursis.domain.policy_decisions import ApprovalRoute
from tests.ag_ui.helpers import ag_ui, approve, run_input
from tests.conftest import KeyMaker, bearer, call, make_settings, script
from tests.routing.kit import payments_agent

ROUTES = {"H1": ApprovalRoute(groups=("finance",), quorum=2)}


@pytest.fixture
async def http(seeded: str) -> AsyncIterator[AsyncTestClient[Any]]:
    settings = make_settings(seeded, agents=["assistant"], run_worker=True)
    service = Service.from_settings(settings, agents=[payments_agent(ROUTES)])
    async with AsyncTestClient(app=create_app(settings, service=service)) as client:
        yield client


async def test_each_resume_is_one_vote_and_a_replayed_vote_counts_once(
    http: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    admin = bearer(await keys.make(Role.ADMIN))
    people = {name: await keys.issue(Role.OPERATOR, name=name) for name in ("ann", "bob", "rex")}
    auth = {name: bearer(issued.secret) for name, issued in people.items()}
    members = [str(people[n].key.id) for n in ("ann", "bob")]
    group = {"workspace": "default", "name": "finance", "members": members}
    assert (await http.post("/v1/groups", json=group, headers=admin)).status_code == 201

    turn = run_input("refunds", script(call("refund", order_id="H1", amount=900)))
    [interrupt] = (await ag_ui(http, turn, agent="payments", headers=auth["rex"]))[-1]["outcome"][
        "interrupts"
    ]

    for _ in range(2):  # ann's vote, then the same resume again
        events = await ag_ui(http, run_input("refunds", resume=[approve(interrupt)]), "payments", auth["ann"])
        assert events[-1]["outcome"]["type"] == "interrupt", events
        assert [i["id"] for i in events[-1]["outcome"]["interrupts"]] == [interrupt["id"]]
    shown = (await http.get(f"/v1/pending/{interrupt['id']}", headers=admin)).json()
    assert (shown["status"], shown["still_needed"], len(shown["votes"])) == ("awaiting", 1, 1)

    events = await ag_ui(http, run_input("refunds", resume=[approve(interrupt)]), "payments", auth["bob"])

    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"]["type"] == "success", events
    assert (await http.get(f"/v1/pending/{interrupt['id']}", headers=admin)).json()["status"] == "approved"
