"""Hostile AG-UI inputs: resumes that must decide nothing, and bodies that must be refused (4xx)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from litestar.testing import AsyncTestClient

from sursis.app.container import Container
from sursis.domain.clock import utcnow
from sursis.infra.db.tables import pending_calls
from tests.ag_ui.helpers import REPLAY, ag_ui, approve, run_input
from tests.conftest import KeyMaker, bearer, call, script


async def interrupted(client: AsyncTestClient[Any], thread: str, **kw: Any) -> dict[str, Any]:
    events = await ag_ui(client, run_input(thread, REPLAY), **kw)
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return dict(interrupt)


async def status_of(client: AsyncTestClient[Any], interrupt: dict[str, Any]) -> str:
    return str((await client.get(f"/v1/pending/{interrupt['id']}")).json()["status"])


async def test_a_resume_for_another_workspaces_call_decides_nothing(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    theirs = await interrupted(client, "shared-name")
    intruder = bearer(await keys.make("operator", "other"))
    [mine] = (await ag_ui(client, run_input("shared-name", REPLAY), headers=intruder))[-1]["outcome"][
        "interrupts"
    ]
    assert mine["id"] != theirs["id"], "the same thread id in two workspaces is two conversations"

    events = await ag_ui(
        client, run_input("shared-name", resume=[approve(theirs), approve(mine)]), headers=intruder
    )

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "interrupt_unknown")
    assert await status_of(client, theirs) == "awaiting"
    assert await status_of(client, mine) == "awaiting", "nothing of a refused resume is decided"


async def test_a_resume_that_answers_part_of_the_open_interrupts_decides_none(
    client: AsyncTestClient[Any],
) -> None:
    thread = f"t-{uuid.uuid4()}"
    two = script(
        [
            call("replay_dlq_event", event_id="evt_1001", reason="a"),
            call("replay_dlq_event", event_id="evt_1002", reason="b"),
        ]
    )
    first, second = (await ag_ui(client, run_input(thread, two)))[-1]["outcome"]["interrupts"]

    events = await ag_ui(client, run_input(thread, resume=[approve(first)]))

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "resume_incomplete")
    assert second["id"] in events[-1]["message"]
    assert [await status_of(client, i) for i in (first, second)] == ["awaiting", "awaiting"]


async def test_a_wrong_interrupt_id_is_a_run_error(client: AsyncTestClient[Any]) -> None:
    thread = f"t-{uuid.uuid4()}"
    interrupt = await interrupted(client, thread)
    for wrong in ("not-an-id", str(uuid.uuid4())):
        events = await ag_ui(client, run_input(thread, resume=[approve({"id": wrong})]))
        assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "interrupt_unknown")
    assert await status_of(client, interrupt) == "awaiting"


async def test_a_resume_that_lost_the_race_is_stale_and_not_a_second_decision(
    client: AsyncTestClient[Any],
) -> None:
    thread = f"t-{uuid.uuid4()}"
    interrupt = await interrupted(client, thread)
    denied = await client.post(
        f"/v1/pending/{interrupt['id']}/resolve", json={"decision": "deny", "reason": "no"}
    )
    assert denied.status_code == 200

    events = await ag_ui(client, run_input(thread, resume=[approve(interrupt)]))

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "interrupt_stale")
    assert await status_of(client, interrupt) == "denied"


async def test_an_expired_interrupt_is_a_run_error(
    client: AsyncTestClient[Any], container: Container
) -> None:
    thread = f"t-{uuid.uuid4()}"
    interrupt = await interrupted(client, thread)
    async with container.uow() as uow:
        await uow.session.execute(  # type: ignore[attr-defined]
            pending_calls.update()
            .where(pending_calls.c.correlation_id == uuid.UUID(interrupt["id"]))
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
        await uow.commit()

    events = await ag_ui(client, run_input(thread, resume=[approve(interrupt)]))

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "interrupt_expired"), events
    assert await status_of(client, interrupt) == "expired"


async def test_a_user_key_cannot_approve_through_a_resume(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    user = bearer(await keys.make("user"))
    thread = f"t-{uuid.uuid4()}"
    interrupt = await interrupted(client, thread, headers=user)
    assert "args" not in interrupt["metadata"], "a user key sees the summary, as in GET /v1/pending/{id}"

    events = await ag_ui(client, run_input(thread, resume=[approve(interrupt)]), headers=user)

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "forbidden")
    assert await status_of(client, interrupt) == "awaiting"


async def test_a_payload_outside_the_response_schema_decides_nothing(client: AsyncTestClient[Any]) -> None:
    thread = f"t-{uuid.uuid4()}"
    interrupt = await interrupted(client, thread)
    for payload in ({"approved": "true"}, {"approved": 1}, {}, None, "yes"):
        entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}
        events = await ag_ui(client, run_input(thread, resume=[entry]))
        assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "resume_payload_invalid"), payload
    assert await status_of(client, interrupt) == "awaiting"


async def test_bad_bodies_are_problems_and_a_key_that_may_not_converse_is_refused_first(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    url = "/v1/agents/ops/ag-ui"
    for body in (
        {},
        {"threadId": 1, "runId": "r", "messages": []},
        {"threadId": "t", "runId": "r", "messages": []},
    ):
        response = await client.post(url, json=body)
        assert 400 <= response.status_code < 500, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["code"]
    wrong = await client.post(url, json={"threadId": 1, "runId": "r", "messages": []})
    assert (wrong.status_code, wrong.json()["code"]) == (422, "validation_failed")
    assert [e["loc"] for e in wrong.json()["errors"]] == [["threadId"]]
    listed = await client.post(url, json=[run_input("t", "hi")])
    assert (listed.status_code, listed.json()["code"]) == (422, "validation_failed")
    garbage = await client.post(url, content=b"\xff{", headers={"Content-Type": "application/json"})
    assert 400 <= garbage.status_code < 500 and garbage.json()["code"]
    unknown = await client.post("/v1/agents/nobody/ag-ui", json=run_input("t", "hi"))
    assert (unknown.status_code, unknown.json()["code"]) == (404, "not_found")
    system = bearer(await keys.make("system"))
    refused = await client.post(url, content=b"not even json", headers=system)
    assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
