"""`sursis.Service`: the embedding API, on SQLite and PostgreSQL through the migrations."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

import sursis
from sursis import AgentDefinition, Category, DeclaredTool, Executor, Service, ToolSpec
from sursis.app.main import create_app
from sursis.domain.records import AuditQuery
from sursis.testing import ScriptedModel, expect_pending, resolve_and_settle, settle
from tests.conftest import admin_headers, make_settings


async def write(target: str) -> dict[str, Any]:
    """Write something."""
    return {"written": target}


async def read(key: str) -> str:
    """Read something."""
    return f"value of {key}"


async def ask(question: str) -> str:
    """Ask a person."""
    return ""


def agents() -> list[AgentDefinition]:
    tools = (
        DeclaredTool.declare(write, ToolSpec("write", category=Category.MUTATE, effect="Write {target}")),
        DeclaredTool.declare(read, ToolSpec("read")),
        DeclaredTool.declare(ask, ToolSpec("ask", executor=Executor.HUMAN)),
    )
    return [AgentDefinition("writer", "Write what you are told.", tools)]


async def test_a_gated_call_suspends_and_resumes_once_approved(database_url: str) -> None:
    model = ScriptedModel().calls(("read", {"key": "a"}), ("write", {"target": "b"})).text("done")
    async with Service.open(database_url, agents=agents(), model=model.model) as svc:
        conversation = await svc.start_conversation("writer", workspace="team")
        assert conversation.created_by == "embedded"
        run = await svc.send(conversation.id, "write b")
        assert run.status == "queued"
        assert await svc.run_until_idle() == 1
        view = await svc.get_run(run.id)
        assert view.run.status == "suspended"
        [call] = view.pending
        assert (call.tool_name, call.args, call.workspace) == ("write", {"target": "b"}, "team")
        assert [c.correlation_id for c in await svc.pending(conversation_id=conversation.id)] == [
            call.correlation_id
        ]
        assert await svc.pending(conversation_id=uuid.uuid4()) == []
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output, view.pending) == ("completed", "done", [])
        assert model.remaining == 0
        # The tool results of the parallel turn reached the model together.
        returned = [
            p for m in model.requests[-1] for p in getattr(m, "parts", ()) if p.part_kind == "tool-return"
        ]
        assert {p.tool_name for p in returned} == {"read", "write"}
        audit = (
            await svc.container.audit.list_audit(
                svc.principal, AuditQuery(correlation_id=call.correlation_id)
            )
        ).items
        assert [(e.action, e.actor) for e in audit if e.action.startswith("pending.")] == [
            ("pending.requested", "system:worker"),
            ("pending.approved", "embedded"),
        ]


async def test_embedded_calls_are_audited_under_the_actor_given(database_url: str) -> None:
    model = ScriptedModel().call("write", target="x")
    async with Service.open(database_url, agents=agents(), model=model.model, actor="nightly-job") as svc:
        conversation = await svc.start_conversation("writer")
        await svc.send(conversation.id, "go")
        [call] = await expect_pending(svc, tool_name="write")
        await svc.resolve(call.correlation_id, "deny", reason="not today")
        decided = await svc.pending(status=None)
        assert decided[0].resolved_by == "nightly-job"
        view = await settle(svc, call.run_id)
        assert view.run.status == "completed"
        audit = (
            await svc.container.audit.list_audit(
                svc.principal, AuditQuery(correlation_id=call.correlation_id)
            )
        ).items
        assert ("pending.denied", "nightly-job") in [(e.action, e.actor) for e in audit]


async def test_resolving_twice_is_stale_and_an_unknown_id_is_not_found(database_url: str) -> None:
    model = ScriptedModel().call("ask", question="colour?").text("noted")
    async with Service.open(database_url, agents=agents(), model=model.model) as svc:
        conversation = await svc.start_conversation("writer")
        await svc.send(str(conversation.id), "ask me")
        [call] = await expect_pending(svc, tool_name="ask")
        assert call.kind == "elicitation"
        await svc.resolve(call.correlation_id, "answer", result="blue")
        with pytest.raises(sursis.Stale):
            await svc.resolve(call.correlation_id, "answer", result="red")
        with pytest.raises(sursis.NotFound):
            await svc.resolve(uuid.uuid4(), "approve")
        with pytest.raises(sursis.ValidationFailed):
            await svc.start_conversation("nobody")
        assert (await settle(svc, call.run_id)).run.output == "noted"


async def test_events_are_the_stream_the_sse_route_carries(database_url: str) -> None:
    model = ScriptedModel().call("write", target="x").text("written")
    async with Service.open(database_url, agents=agents(), model=model.model) as svc:
        conversation = await svc.start_conversation("writer")
        await svc.send(conversation.id, "go")
        [call] = await expect_pending(svc)
        stored = [e async for e in svc.events(conversation.id, follow=False)]
        types = [e.type for e in stored]
        assert "pending.created" in types and types[-1] == "run.status"
        assert [e.id for e in stored] == sorted(e.id for e in stored)
        assert stored[0].envelope()["conversation_id"] == str(conversation.id)

        async def follow() -> list[str]:
            seen: list[str] = []
            async for event in svc.events(conversation.id, after=stored[-1].id):
                seen.append(event.type)
                if event.type == "run.completed":
                    return seen
            return seen

        follower = asyncio.create_task(follow())
        await resolve_and_settle(svc, call, "approve")
        seen = await asyncio.wait_for(follower, 10)
        assert seen[0] == "pending.resolved" and seen[-1] == "run.completed"


async def test_open_migrates_when_asked_and_settings_come_only_from_arguments(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SURSIS_STEP_LIMIT", "1")
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    model = ScriptedModel().call("read", key="a").text("read it")
    async with Service.open(url, agents=agents(), model=model.model, migrate=True, history_turns=3) as svc:
        assert (svc.settings.step_limit, svc.settings.history_turns) == (25, 3)
        conversation = await svc.start_conversation("writer")
        run = await svc.send(conversation.id, "read a")
        assert (await settle(svc, run.id)).run.output == "read it"
    with pytest.raises(TypeError, match="no_such_setting"):
        async with Service.open(url, no_such_setting=1):
            pass


async def test_a_background_worker_runs_the_work_when_asked(database_url: str) -> None:
    model = ScriptedModel().text("hello")
    async with Service.open(
        database_url, agents=agents(), model=model.model, run_worker=True, worker_poll_seconds=0.1
    ) as svc:
        conversation = await svc.start_conversation("writer")
        run = await svc.send(conversation.id, "hi")
        view = await svc.wait_for_run(run.id, within=10)
        assert (view.run.status, view.run.output) == ("completed", "hello")


async def test_the_http_app_runs_on_the_service_it_is_given(seeded: str) -> None:
    model = ScriptedModel().call("write", target="z")
    service = Service.from_settings(make_settings(seeded), agents=agents(), model=model.model)
    headers = await admin_headers(seeded)
    async with AsyncTestClient(app=create_app(service.settings, service=service)) as client:
        client.headers.update(headers)
        created = await client.post("/v1/conversations", json={"agent": "writer"})
        assert created.status_code == 201, created.text
        posted = await client.post(
            f"/v1/conversations/{created.json()['id']}/messages", params={"wait": 10}, json={"content": "z"}
        )
        assert posted.json()["status"] == "suspended", posted.text
        [pending] = posted.json()["pending"]
        assert pending["tool_name"] == "write"
        assert model.requests, "the app ran the service's own model"


async def test_with_a_background_worker_a_message_runs_at_once_and_wait_until_idle_needs_no_read(
    database_url: str,
) -> None:
    model = ScriptedModel().calls(("write", {"target": "b"})).text("done")
    async with Service.open(database_url, agents=agents(), model=model.model, run_worker=True) as svc:
        conversation = await svc.start_conversation("writer")
        run = await svc.send(conversation.id, "write b")
        # Taken by this process's worker in the message's own transaction: never queued.
        assert run.status == "running"
        assert await svc.wait_until_idle(within=30)
        view = await svc.get_run(run.id)
        assert view.run.status == "suspended"
        await svc.resolve(view.pending[0].correlation_id, "approve")
        assert await svc.wait_until_idle(within=30)
        done = await svc.get_run(run.id)
        assert (done.run.status, done.run.output) == ("completed", "done")
        assert done.run.claims == 0 and done.run.segment == 2
