"""Repositories and the runner on real SQLite and PostgreSQL, migrated with Alembic (no HTTP)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from sursis.app.container import Container
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.clock import utcnow
from sursis.domain.records import Conversation, PendingCall, Principal, ToolCallMetadata, ToolCallRecord
from sursis.domain.states import Decision, PendingStatus, RunStatus
from sursis.domain.tools import Executor, PendingKind
from sursis.infra.db.tables import pending_calls
from tests.conftest import call, script

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)

GATED_TWICE = script(
    [
        call("list_dlq_events"),
        call("replay_dlq_event", event_id="evt_1001", reason="a"),
        call("replay_dlq_event", event_id="evt_1002", reason="b"),
    ],
    "finished",
)


async def _suspended_run(
    container: Container, content: str = GATED_TWICE
) -> tuple[uuid.UUID, list[PendingCall]]:
    conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
    run = await container.conversations.post_message(ADMIN, conversation.id, content)
    assert await container.worker.run_once()
    view = await container.runs.get_run(ADMIN, run.id)
    assert view.run.status is RunStatus.SUSPENDED
    return run.id, view.pending


async def test_runner_suspends_resumes_once_and_only_appends_to_the_log(container: Container) -> None:
    run_id, pending = await _suspended_run(container)
    assert len(pending) == 2
    run = (await container.runs.get_run(ADMIN, run_id)).run
    async with container.uow() as uow:
        before = [m.body for m in await uow.messages.read(run.conversation_id)]

    await container.pending_calls.resolve_pending(
        ADMIN, pending[0].correlation_id, Resolution(Decision.APPROVE)
    )
    assert not await container.worker.run_once(), "the run must not resume before its last call is decided"
    await container.pending_calls.resolve_pending(
        ADMIN, pending[1].correlation_id, Resolution(Decision.DENY, reason="no")
    )
    assert await container.worker.run_once()
    assert not await container.worker.run_once()

    view = await container.runs.get_run(ADMIN, run_id)
    assert view.run.status is RunStatus.COMPLETED
    assert view.run.output == "finished"
    assert view.run.segment == 2
    async with container.uow() as uow:
        after = await uow.messages.read(run.conversation_id)
        records = await uow.tool_calls.for_run(run_id)
    assert [m.body for m in after[: len(before)]] == before
    assert [m.seq for m in after] == list(range(1, len(after) + 1))
    assert sorted(r.metadata.tool_name for r in records) == ["list_dlq_events", "replay_dlq_event"]


async def test_racing_transitions_have_one_winner(container: Container) -> None:
    _, pending = await _suspended_run(container)
    target = pending[0].correlation_id

    async def attempt(status: PendingStatus) -> bool:
        async with container.uow() as uow:
            won = await uow.pending.transition(
                target, status, utcnow(), resolved_by="op", reason=None, resolution={"decision": status.value}
            )
            await uow.commit()
            return won

    results = await asyncio.gather(
        *(attempt(PendingStatus.APPROVED) for _ in range(5)), attempt(PendingStatus.DENIED)
    )
    assert results.count(True) == 1


async def test_only_the_last_resolution_requeues_the_run(container: Container) -> None:
    run_id, pending = await _suspended_run(container)

    async def resolve_one() -> bool:
        async with container.uow() as uow:
            requeued = await uow.runs.resolve_one_awaiting(run_id, utcnow())
            await uow.commit()
            return requeued

    assert sorted(await asyncio.gather(*(resolve_one() for _ in pending))) == [False, True]
    async with container.uow() as uow:
        run = await uow.runs.get(run_id)
    assert run is not None and run.status is RunStatus.QUEUED and run.awaiting_count == 0


async def test_tool_call_records_are_idempotent_per_conversation(container: Container) -> None:
    now = utcnow()
    conversation_id = uuid.uuid4()
    async with container.uow() as uow:
        await uow.conversations.add(Conversation(conversation_id, "default", "ops", "open", None, now, now))
        md = ToolCallMetadata("t", "ops", 1.0, True, None, None, now, now)
        record = ToolCallRecord(conversation_id, uuid.uuid4(), "call_1", md, {"ok": True, "result": 1})
        assert await uow.tool_calls.record(record)
        assert not await uow.tool_calls.record(record)
        stored = await uow.tool_calls.get(conversation_id, "call_1")
        await uow.commit()
    assert stored is not None and stored.result == {"ok": True, "result": 1}


async def test_claims_never_hand_one_run_to_two_workers(container: Container) -> None:
    for _ in range(3):
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        await container.conversations.post_message(ADMIN, conversation.id, "hello")

    async def claim(owner: str) -> uuid.UUID | None:
        now = utcnow()
        async with container.uow() as uow:
            run = await uow.runs.claim_next(owner, now, now + timedelta(seconds=30))
            await uow.commit()
            return run.id if run else None

    claimed = await asyncio.gather(*(claim(f"w{i}") for i in range(5)))
    won = [c for c in claimed if c is not None]
    assert len(won) == 3
    assert len(set(won)) == 3


async def test_sweeper_expires_overdue_calls_and_the_model_is_told(container: Container) -> None:
    run_id, pending = await _suspended_run(container, script([call("ask_operator", question="?")]))
    async with container.uow() as uow:
        await uow.session.execute(
            pending_calls.update()
            .where(pending_calls.c.run_id == run_id)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
        await uow.commit()
    assert await container.worker.sweep() >= 1
    call_row = await container.pending_calls.get_pending(ADMIN, pending[0].correlation_id)
    assert call_row.status is PendingStatus.EXPIRED
    assert call_row.executor is Executor.HUMAN and call_row.kind is PendingKind.ELICITATION
    assert await container.worker.run_once()
    view = await container.runs.get_run(ADMIN, run_id)
    assert view.run.status is RunStatus.COMPLETED
    assert "APPROVAL_EXPIRED" in (view.run.output or "")
