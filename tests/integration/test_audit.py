"""The audit log: a row for every transition, in order, under the actor's identity; append-only;
paged over HTTP and scoped by workspace. Real databases, the real worker driven step by step."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient
from pydantic_ai import RunContext
from sqlalchemy.exc import DBAPIError

from sursis.app.container import Container, agent_definitions, build_container
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.clock import utcnow
from sursis.domain.errors import Forbidden
from sursis.domain.identity.keys import IssuedKey
from sursis.domain.records import AuditEntry, AuditQuery, Conversation, Principal, Run
from sursis.domain.runs.runs import RunView
from sursis.domain.states import Decision, RunStatus
from sursis.domain.tools import Category, ToolSpec
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.agents.effects import record_effect
from sursis.infra.agents.models import build_model
from sursis.infra.agents.run_deps import PreApprovalPolicy, RunDeps
from sursis.infra.db.engine import create_engine
from sursis.infra.db.repositories import SqlAuditRepository
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.runner import AgentRunner, Timeouts
from sursis.infra.worker import Worker
from tests.api.http_calls import create_conversation, get_run, post_message, resolve
from tests.conftest import call, eventually, make_settings, script

USER = Principal(id="user:bob", role="user", workspace="default")
OPERATOR = Principal(id="operator:alice", role="operator", workspace="default")
OUTSIDER = Principal(id="operator:eve", role="operator", workspace="elsewhere")
ADMIN = Principal(id="admin:root", role="admin", workspace=None)
WORKER = "system:worker"

REPLAY = script([call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")])
ASK = script([call("ask_operator", question="Which partner is down?")])


async def suspend(container: Container, content: str) -> RunView:
    conversation = await container.conversations.create_conversation(USER, "ops", None)
    run = await container.conversations.post_message(USER, conversation.id, content)
    assert await container.worker.run_once()
    view = await container.runs.get_run(OPERATOR, run.id)
    assert view.run.status is RunStatus.SUSPENDED
    return view


async def audit_of(container: Container, run: RunView) -> list[AuditEntry]:
    rows = (
        await container.audit.list_audit(ADMIN, AuditQuery(conversation_id=run.run.conversation_id))
    ).items
    assert [r.id for r in rows] == sorted(r.id for r in rows if r.id is not None)
    return rows


def trail(rows: list[AuditEntry]) -> list[tuple[str, str]]:
    return [(r.action, r.actor) for r in rows]


RESUMED = [("run.resumed", WORKER), ("run.completed", WORKER)]


@pytest.mark.parametrize(
    ("content", "resolution", "decided"),
    [
        (
            REPLAY,
            Resolution(Decision.APPROVE, args={"event_id": "evt_1002", "reason": "the newer one"}),
            "pending.approved",
        ),
        (REPLAY, Resolution(Decision.DENY, reason="partner still down"), "pending.denied"),
        (REPLAY, Resolution(Decision.REVISE, reason="replay evt_1002"), "pending.revision_requested"),
        (ASK, Resolution(Decision.ANSWER, result="hooks.example.com"), "pending.answered"),
    ],
    ids=["approve-edited", "deny", "revise", "answer"],
)
async def test_each_decision_is_audited_in_order_under_the_operator(
    container: Container, content: str, resolution: Resolution, decided: str
) -> None:
    view = await suspend(container, content)
    [pending] = view.pending
    await container.pending_calls.resolve_pending(OPERATOR, pending.correlation_id, resolution)
    assert await container.worker.run_once()
    assert (await container.runs.get_run(USER, view.run.id)).run.status is RunStatus.COMPLETED

    rows = await audit_of(container, view)
    assert trail(rows) == [
        ("run.queued", USER.id),
        ("run.started", WORKER),
        ("pending.requested", WORKER),
        ("run.suspended", WORKER),
        (decided, OPERATOR.id),
        *RESUMED,
    ]
    decision = rows[4]
    assert decision.correlation_id == pending.correlation_id
    assert decision.run_id == view.run.id
    assert decision.workspace == "default"
    assert decision.details["tool_name"] == pending.tool_name
    assert decision.details["tool_call_id"] == pending.tool_call_id
    assert decision.details.get("reason") == resolution.reason
    if resolution.args is not None:
        assert decision.details["edited_args"] == resolution.args
        assert len(decision.details["args_hash"]) == 64
    assert rows[2].details["kind"] == pending.kind.value
    assert rows[0].at is not None
    assert rows[-1].at is not None
    assert rows[0].at <= rows[-1].at
    segment_traces = {r.trace_id for r in rows if r.actor == WORKER and r.action != "run.started"}
    assert len(segment_traces) == 1, "the resumed segment writes into the suspending segment's trace"
    assert None not in segment_traces


async def test_cancelling_a_suspended_run_is_audited(container: Container) -> None:
    view = await suspend(container, REPLAY)
    await container.runs.cancel_run(OPERATOR, view.run.id)

    rows = await audit_of(container, view)
    assert trail(rows) == [
        ("run.queued", USER.id),
        ("run.started", WORKER),
        ("pending.requested", WORKER),
        ("run.suspended", WORKER),
        ("pending.cancelled", OPERATOR.id),
        ("run.cancelled", OPERATOR.id),
    ]
    assert rows[4].correlation_id == view.pending[0].correlation_id


@pytest.fixture
async def impatient(seeded: str) -> AsyncIterator[Container]:
    built = build_container(make_settings(seeded, approval_timeout_seconds=0.05))
    yield built
    await built.close()


async def test_expiry_is_audited_under_the_sweeper(impatient: Container) -> None:
    view = await suspend(impatient, REPLAY)
    await asyncio.sleep(0.1)
    assert await impatient.worker.sweep() == 2, "one call expired, one run requeued"
    assert await impatient.worker.run_once()

    rows = await audit_of(impatient, view)
    assert trail(rows) == [
        ("run.queued", USER.id),
        ("run.started", WORKER),
        ("pending.requested", WORKER),
        ("run.suspended", WORKER),
        ("pending.expired", "system:sweeper"),
        *RESUMED,
    ]


class CoveringPolicy(PreApprovalPolicy):
    async def covering_authorization(
        self, workspace: str, tool_name: str, args: Any, now: datetime
    ) -> str | None:
        return "auth-replays" if tool_name == "replay_dlq_event" else None


async def test_a_pre_approved_call_is_audited_as_auto_approved(container: Container) -> None:
    settings = container.settings
    runner = AgentRunner(
        container.uow,
        agent_definitions(container.uow),
        build_model("scripted"),
        container.notifier,
        clock=utcnow,
        step_limit=settings.step_limit,
        timeouts=Timeouts(timedelta(hours=1), timedelta(hours=1), timedelta(seconds=30)),
        lease=timedelta(seconds=settings.lease_seconds),
        policy=CoveringPolicy(),
    )
    worker = Worker(
        container.uow,
        runner,
        container.notifier,
        clock=utcnow,
        concurrency=1,
        poll_seconds=0.2,
        lease=timedelta(seconds=settings.lease_seconds),
        sweep_seconds=1,
    )
    conversation = await container.conversations.create_conversation(USER, "ops", None)
    run = await container.conversations.post_message(USER, conversation.id, REPLAY)
    assert await worker.run_once()
    assert (await container.runs.get_run(USER, run.id)).run.status is RunStatus.COMPLETED

    rows = (await container.audit.list_audit(ADMIN, AuditQuery(conversation_id=conversation.id))).items
    assert trail(rows) == [
        ("run.queued", USER.id),
        ("run.started", WORKER),
        ("pending.auto_approved", "authorization:auth-replays"),
        ("run.completed", WORKER),
    ]
    assert rows[2].details["authorization_id"] == "auth-replays"
    assert rows[2].details["tool_name"] == "replay_dlq_event"
    assert [t.metadata.tool_name for t in await container.runs.list_tool_calls(USER, run.id)] == [
        "replay_dlq_event"
    ]


@dataclass
class Button:
    """A gated tool whose first dispatch never returns, so the worker running it can be killed there:
    before its effect, or after the effect and its `tool_calls` row were committed."""

    die_after_effect: bool
    started: asyncio.Event = field(default_factory=asyncio.Event)
    pressed: list[str] = field(default_factory=list)

    def agent(self) -> AgentDefinition:
        async def press_button(ctx: RunContext[RunDeps], label: str) -> dict[str, str]:
            """Press a button.

            Args:
                label: Which one.
            """
            first = not self.started.is_set()
            if first and not self.die_after_effect:
                await self.hang()
            self.pressed.append(label)
            result = {"pressed": label}
            async with ctx.deps.uow() as uow:
                await record_effect(uow, ctx, "press_button", result)
                await uow.commit()
            if first:
                await self.hang()
            return result

        spec = ToolSpec("press_button", category=Category.MUTATE, effect="Press {label}")
        return AgentDefinition("buttons", "Press buttons.", (DeclaredTool.declare(press_button, spec),))

    async def hang(self) -> None:
        self.started.set()
        await asyncio.Event().wait()

    async def press_and_die(self, container: Container) -> tuple[Conversation, Run]:
        """A `buttons` conversation whose turn presses the red button; the segment running it is
        cancelled once the tool started, as when its worker dies."""
        conversation = await container.conversations.create_conversation(USER, "buttons", None)
        run = await container.conversations.post_message(
            USER, conversation.id, script([call("press_button", label="red")], "pressed")
        )
        segment = asyncio.create_task(container.worker.run_once())
        await asyncio.wait_for(self.started.wait(), 10)
        segment.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await segment
        return conversation, run


@pytest.mark.parametrize("revoked", [False, True], ids=["still-covered", "revoked-meanwhile"])
@pytest.mark.parametrize("die_after_effect", [False, True], ids=["before-the-effect", "after-the-effect"])
async def test_a_pre_approved_call_dispatched_again_after_a_crash_is_audited_once(
    seeded: str, die_after_effect: bool, revoked: bool
) -> None:
    button = Button(die_after_effect)
    settings = make_settings(seeded, lease_seconds=0.3)
    container = build_container(settings, extra_agents=[button.agent()])
    try:
        authorization = await container.authorizations.create(
            OPERATOR, tool_name="press_button", reason="drill"
        )
        # The worker dies while the pre-approved call runs: its lease runs out, another takes over.
        conversation, run = await button.press_and_die(container)
        if revoked:
            await container.authorizations.revoke(OPERATOR, authorization.id)
        assert await eventually(container.worker.sweep)
        assert await container.worker.run_once()

        view = await container.runs.get_run(USER, run.id)
        rows = (await container.audit.list_audit(ADMIN, AuditQuery(conversation_id=conversation.id))).items
        records = await container.runs.list_tool_calls(USER, run.id)
    finally:
        await container.close()

    # The approval recorded before the crash holds: the call is neither gated nor audited again.
    assert (view.run.status, view.run.output, view.pending) == (RunStatus.COMPLETED, "pressed", [])
    assert button.pressed == ["red"]
    decisions = [r for r in rows if r.action.startswith("pending.")]
    assert [r.action for r in decisions] == ["pending.auto_approved"]
    [approved] = decisions
    assert approved.actor == f"authorization:{authorization.id}"
    assert approved.details["tool_call_id"] == records[0].tool_call_id
    assert [(r.metadata.tool_name, r.result) for r in records] == [
        ("press_button", {"ok": True, "result": {"pressed": "red"}})
    ]


async def test_the_audit_log_is_scoped_to_the_readers_workspace(container: Container) -> None:
    view = await suspend(container, REPLAY)
    mine = (await container.audit.list_audit(OPERATOR, AuditQuery())).items
    assert {r.run_id for r in mine} == {view.run.id}
    assert (await container.audit.list_audit(OUTSIDER, AuditQuery())).items == []
    assert len((await container.audit.list_audit(ADMIN, AuditQuery())).items) == len(mine)
    with pytest.raises(Forbidden):
        await container.audit.list_audit(USER, AuditQuery())


async def test_audit_rows_cannot_be_updated_or_deleted(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with SqlUnitOfWorkFactory(engine)() as uow:
            await uow.audit.append(
                AuditEntry(action="pending.approved", actor="operator:alice", workspace="default"), utcnow()
            )
            await uow.commit()
        for statement in ("UPDATE audit_log SET actor = 'operator:mallory'", "DELETE FROM audit_log"):
            async with engine.connect() as conn:
                with pytest.raises(DBAPIError, match="append-only"):
                    await conn.execute(sa.text(statement))
                await conn.rollback()
        async with engine.connect() as conn:
            actors = (await conn.execute(sa.text("SELECT actor FROM audit_log"))).scalars().all()
        assert actors == ["operator:alice"]
    finally:
        await engine.dispose()


def test_the_audit_repository_has_no_update_or_delete_path() -> None:
    public = {name for name in vars(SqlAuditRepository) if not name.startswith("_")}
    # flush writes the appended rows (inserts only); take_held hands them, sealed, to the events'
    # writer, which inserts them with the events; append_unless_newest appends on a condition (its
    # row inserted by that writer too, or nothing written)
    assert public == {"append", "append_unless_newest", "flush", "search", "take_held"}


async def test_get_audit_pages_and_filters(client: AsyncTestClient[Any], admin_key: IssuedKey) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, REPLAY)
    correlation_id = run["pending"][0]["correlation_id"]
    await resolve(client, correlation_id, decision="approve")
    assert (await get_run(client, run["id"]))["status"] == "completed"

    seen: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"conversation_id": cid, "limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/audit", params=params)).json()
        seen += page["items"]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert [r["action"] for r in seen] == [
        "run.queued",
        "run.started",
        "pending.requested",
        "run.suspended",
        "pending.approved",
        "run.resumed",
        "run.completed",
    ]
    assert [r["id"] for r in seen] == sorted(r["id"] for r in seen)
    assert seen[4]["actor"] == str(admin_key.key.id)
    assert seen[4]["trace_id"] is not None
    assert seen[4]["trace_id"] != seen[3]["trace_id"], "the decision is recorded in its request's trace"
    run_traces = {r["trace_id"] for r in seen if r["action"] != "pending.approved"}
    assert len(run_traces) == 1, "queued, started, suspended, resumed and completed: one trace"
    assert None not in run_traces

    by_call = (await client.get("/v1/audit", params={"correlation_id": correlation_id})).json()["items"]
    assert [r["action"] for r in by_call] == ["pending.requested", "pending.approved"]
    approvals = (await client.get("/v1/audit", params={"action": "pending.approved"})).json()["items"]
    assert [r["correlation_id"] for r in approvals] == [correlation_id]
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    assert (await client.get("/v1/audit", params={"since": later})).json()["items"] == []
    earlier = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    since_earlier = (await client.get("/v1/audit", params={"since": earlier})).json()["items"]
    assert [r["action"] for r in since_earlier if r["conversation_id"] is None] == ["key.created"]
    assert len(since_earlier) == len(seen) + 1
    assert (await client.get("/v1/audit", params={"conversation_id": str(uuid.uuid4())})).json()[
        "items"
    ] == []

    for bad in ({"cursor": "not-a-cursor"}, {"since": "2026-01-01T00:00:00"}, {"limit": 0}):
        response = await client.get("/v1/audit", params=bad)
        assert response.status_code == 422, bad
        assert response.json()["code"] == "validation_failed"
