"""Durability edges on real SQLite and PostgreSQL: late decisions, database errors inside a segment,
runs that never make progress, and cancels that arrive after a segment's last persistence point."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ValidationError
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from sursis.app.container import Container, build_container
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.clock import utcnow
from sursis.domain.errors import Stale
from sursis.domain.records import AuditQuery, PendingCall, Principal, Run
from sursis.domain.states import Decision, PendingStatus, RunStatus
from sursis.infra.agents.run_deps import PreApprovalPolicy
from sursis.infra.db.engine import create_engine, is_sqlite
from sursis.infra.db.tables import pending_calls, runs
from tests.conftest import call, make_settings, script

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")])
"""One gated call; after it the scripted model answers with the tool results it saw."""


@contextlib.asynccontextmanager
async def built(database_url: str, **settings: Any) -> AsyncIterator[Container]:
    model = settings.pop("model", None)
    policy = settings.pop("policy", None)
    container = build_container(make_settings(database_url, **settings), model=model, policy=policy)
    try:
        yield container
    finally:
        await container.close()


async def run_of(container: Container, run_id: uuid.UUID) -> Run:
    async with container.uow() as uow:
        run = await uow.runs.get(run_id)
    assert run is not None
    return run


async def audit_trail(container: Container, conversation_id: uuid.UUID) -> list[tuple[str, dict[str, Any]]]:
    async with container.uow() as uow:
        rows = await uow.audit.search(None, AuditQuery(conversation_id=conversation_id, limit=100))
    return [(row.action, row.details) for row in rows]


async def until_lease_expired(container: Container, run_id: uuid.UUID) -> None:
    run = await run_of(container, run_id)
    assert run.lease_expires_at is not None
    await asyncio.sleep(max(0.0, (run.lease_expires_at - utcnow()).total_seconds()) + 0.05)


async def expire_now(container: Container, run_id: uuid.UUID) -> None:
    """Move the run's awaiting calls past their `expires_at`, as time would."""
    async with container.uow() as uow:
        await uow.session.execute(
            pending_calls.update()
            .where(pending_calls.c.run_id == run_id)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
        await uow.commit()


async def overdue_approval(container: Container) -> tuple[uuid.UUID, uuid.UUID, PendingCall]:
    """A run suspended on one approval whose `expires_at` has passed, with no sweeper run yet."""
    conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
    run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
    assert await container.worker.run_once()
    [pending] = (await container.runs.get_run(ADMIN, run.id)).pending
    await expire_now(container, run.id)
    return conversation.id, run.id, pending


# 1. An overdue call cannot be decided, even when no sweeper has run.


async def test_an_overdue_approval_is_stale_and_expires_with_the_sweepers_semantics(
    seeded: str,
) -> None:
    async with built(seeded) as container:
        conversation_id, run_id, pending = await overdue_approval(container)

        with pytest.raises(Stale) as late:
            await container.pending_calls.resolve_pending(
                ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
            )
        assert "expired" in late.value.message
        assert late.value.extra["pending_status"] == "expired"
        assert late.value.extra["resolved_by"] == "system:sweeper"

        expired = await container.pending_calls.get_pending(ADMIN, pending.correlation_id)
        assert expired.status is PendingStatus.EXPIRED
        assert expired.resolved_by == "system:sweeper"
        queued = await run_of(container, run_id)
        assert queued.status is RunStatus.QUEUED and queued.awaiting_count == 0
        assert await container.worker.sweep() == 0, "nothing left for a sweeper"

        assert await container.worker.run_once()
        done = await run_of(container, run_id)
        assert done.status is RunStatus.COMPLETED
        [told] = json.loads((done.output or "").removeprefix("RESULTS: "))
        assert told["error"]["code"] == "APPROVAL_EXPIRED"
        async with container.uow() as uow:
            assert await uow.tool_calls.for_run(run_id) == []
        trail = [action for action, _ in await audit_trail(container, conversation_id)]
        assert trail.count("pending.expired") == 1
        assert "pending.approved" not in trail


async def test_a_decision_write_never_wins_over_expires_at(seeded: str) -> None:
    async with built(seeded) as container:
        _, _, pending = await overdue_approval(container)

        async def transition(status: PendingStatus, before_expiry: bool) -> bool:
            async with container.uow() as uow:
                won = await uow.pending.transition(
                    pending.correlation_id,
                    status,
                    utcnow(),
                    resolved_by="op",
                    reason=None,
                    resolution={"decision": status.value},
                    before_expiry=before_expiry,
                )
                await uow.commit()
                return won

        assert not await transition(PendingStatus.APPROVED, before_expiry=True)
        assert await transition(PendingStatus.EXPIRED, before_expiry=False)


# 2 and 4. A database error inside a segment abandons it; the heartbeat outlives errors.


class HeldModel:
    """Calls `list_dlq_events`, then answers `done`; its first request waits until released."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.requests = 0

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        self.requests += 1
        if self.requests == 1:
            self.entered.set()
            await self.release.wait()
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            yield "done"
        else:
            yield {0: DeltaToolCall(name="list_dlq_events", json_args="{}", tool_call_id="call_list")}

    def model(self) -> FunctionModel:
        return FunctionModel(stream_function=self.stream, model_name="held")


def impatient(engine: AsyncEngine, database_url: str) -> None:
    """Lock waits of this engine's connections give up after 300 ms instead of 30 s."""

    @event.listens_for(engine.sync_engine, "connect")
    def _short_lock_wait(dbapi_connection: Any, _record: Any) -> None:
        if is_sqlite(database_url):
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA busy_timeout=300")
            cursor.close()
        else:
            dbapi_connection.run_async(lambda conn: conn.execute("SET lock_timeout = '300ms'"))


@contextlib.asynccontextmanager
async def run_row_locked(database_url: str, run_id: uuid.UUID) -> AsyncIterator[datetime | None]:
    """Another client holds the run's row lock (PostgreSQL) or the database's write lock (SQLite).

    Yields the run's lease as it stands under the lock."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn, conn.begin():
            # SQLite: the transaction began with BEGIN IMMEDIATE, which took the write lock.
            lease = await conn.scalar(
                sa.select(runs.c.lease_expires_at).where(runs.c.id == run_id).with_for_update()
            )
            yield lease
    finally:
        await engine.dispose()


async def test_a_database_error_in_a_segment_abandons_it_and_the_heartbeat_survives_errors(
    seeded: str,
) -> None:
    held = HeldModel()
    async with built(seeded, model=held.model(), lease_seconds=1.5) as container:
        impatient(container.uow.engine, seeded)
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        run = await container.conversations.post_message(ADMIN, conversation.id, "list them")
        segment = asyncio.create_task(container.worker.run_once())
        await asyncio.wait_for(held.entered.wait(), 10)

        # The heartbeat meets a locked database (every beat fails), and keeps beating afterwards.
        with capture_logs() as logs:
            async with run_row_locked(seeded, run.id) as before:
                await asyncio.sleep(1.2)
        assert any(e["event"] == "worker.heartbeat_failed" for e in logs)
        assert before is not None

        async def renewed() -> bool:
            lease = (await run_of(container, run.id)).lease_expires_at
            return lease is not None and lease > before

        await eventually_true(renewed, 5)
        assert not segment.done()

        # The model answers while the database is locked: persisting the answer fails.
        with capture_logs() as logs:
            async with run_row_locked(seeded, run.id):
                held.release.set()
                assert await asyncio.wait_for(segment, 10)
        assert [e for e in logs if e["event"] == "run.segment_abandoned"]
        abandoned = await run_of(container, run.id)
        assert abandoned.status is RunStatus.RUNNING, "not failed: the lease will hand it on"
        assert abandoned.error is None
        assert abandoned.claims == 1
        async with container.uow() as uow:
            assert await uow.messages.read(conversation.id) == []

        await until_lease_expired(container, run.id)
        assert await container.worker.sweep() == 1
        assert await container.worker.run_once()

        done = await run_of(container, run.id)
        assert done.status is RunStatus.COMPLETED
        assert done.output == "done"
        assert done.claims == 0
        async with container.uow() as uow:
            stored = await uow.messages.read(conversation.id)
            records = await uow.tool_calls.for_run(run.id)
        assert [m.seq for m in stored] == [1, 2, 3, 4]
        assert [r.metadata.tool_name for r in records] == ["list_dlq_events"]
        trail = [action for action, _ in await audit_trail(container, conversation.id)]
        assert trail == ["run.queued", "run.started", "run.resumed", "run.completed"]


async def eventually_true(check: Callable[[], Awaitable[bool]], limit: float) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


class FailingModel:
    """A model whose requests fail: an HTTP error from the provider, or an exception with secrets."""

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        prompt = next(
            str(p.content)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        )
        if "provider" in prompt:
            raise ModelHTTPError(503, "failing", body={"error": "upstream db-7.internal:5432 is down"})
        raise RuntimeError("could not parse row: postgres://admin:hunter2@db-7.internal/prod")
        yield ""  # pragma: no cover - makes this an async generator

    def model(self) -> FunctionModel:
        return FunctionModel(stream_function=self.stream, model_name="failing")


async def test_a_failed_run_stores_a_summary_not_the_exception_text(seeded: str) -> None:
    async with built(seeded, model=FailingModel().model()) as container:
        failures = []
        for content in ("ask the provider", "anything else"):
            conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
            run = await container.conversations.post_message(ADMIN, conversation.id, content)
            with capture_logs() as logs:
                assert await container.worker.run_once()
            [logged] = [e for e in logs if e["event"] == "run.segment_error"]
            assert logged["exc_info"], "the details go to the logs"
            failed = await run_of(container, run.id)
            assert failed.status is RunStatus.FAILED and failed.error is not None
            failures.append(failed.error)
            assert (
                await container.conversations.get_conversation(ADMIN, conversation.id)
            ).active_run_id is None

    provider, internal = failures
    assert provider.code == "model_error"
    assert "HTTP 503" in provider.message
    assert internal.code == "internal_error"
    for error in failures:
        assert "details are in the service logs" in error.message
        for secret in ("hunter2", "db-7", "postgres://", "RuntimeError"):
            assert secret not in error.message


# 3. A run that never makes progress is failed after a bounded number of claims.


@contextlib.asynccontextmanager
async def completion_refused(database_url: str, marker: str) -> AsyncIterator[None]:
    """A trigger that refuses to mark runs whose input contains `marker` completed."""
    engine = create_engine(database_url)
    condition = f"NEW.status = 'completed' AND NEW.input LIKE '%{marker}%'"
    if is_sqlite(database_url):
        create = [
            f"CREATE TRIGGER refuse_completion BEFORE UPDATE OF status ON runs WHEN {condition} "
            "BEGIN SELECT RAISE(ABORT, 'completion refused'); END"
        ]
        drop = ["DROP TRIGGER IF EXISTS refuse_completion"]
    else:
        create = [
            "CREATE FUNCTION refuse_completion() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'completion refused'; END $$",
            f"CREATE TRIGGER refuse_completion BEFORE UPDATE ON runs FOR EACH ROW WHEN ({condition}) "
            "EXECUTE FUNCTION refuse_completion()",
        ]
        drop = [
            "DROP TRIGGER IF EXISTS refuse_completion ON runs",
            "DROP FUNCTION IF EXISTS refuse_completion()",
        ]
    try:
        async with engine.begin() as conn:
            for statement in create:
                await conn.execute(sa.text(statement))
        yield
    finally:
        async with engine.begin() as conn:
            for statement in drop:
                await conn.execute(sa.text(statement))
        await engine.dispose()


async def test_a_run_whose_segments_keep_failing_is_failed_after_the_attempts(seeded: str) -> None:
    async with built(seeded, max_segment_attempts=2, lease_seconds=0.6) as container:
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        run = await container.conversations.post_message(ADMIN, conversation.id, "please refuse completion")
        async with completion_refused(seeded, "refuse completion"):
            # Two attempts, each failing to write the completion. A final answer is stored with the
            # run's end, so an attempt that fails there stored nothing: it counts, the first too.
            for _ in range(2):
                with pytest.raises(sa_exc.DBAPIError):
                    await container.worker.run_once()
                await until_lease_expired(container, run.id)
                assert await container.worker.sweep() == 1
                assert (await run_of(container, run.id)).status is RunStatus.QUEUED
            assert await container.worker.run_once(), "the next claim gives up"

        failed = await run_of(container, run.id)
        assert failed.status is RunStatus.FAILED
        assert failed.error is not None and failed.error.code == "segment_attempts_exhausted"
        assert failed.lease_owner is None and failed.claims == 0
        trail = await audit_trail(container, conversation.id)
        assert trail[-1] == ("run.failed", {"error": "segment_attempts_exhausted"})
        assert [action for action, _ in trail].count("run.resumed") == 1

        assert (await container.conversations.get_conversation(ADMIN, conversation.id)).active_run_id is None
        follow_up = await container.conversations.post_message(ADMIN, conversation.id, "still there?")
        assert await container.worker.run_once()
        assert (await run_of(container, follow_up.id)).status is RunStatus.COMPLETED


async def test_a_log_that_cannot_be_read_fails_the_run_after_the_attempts(seeded: str) -> None:
    """The claim's transaction reads the log too: a row that does not decode must not undo the claim
    (the run would be claimed again forever); the attempts are spent and the run is failed."""
    async with built(seeded, max_segment_attempts=2, lease_seconds=0.6) as container:
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        async with container.uow() as uow:
            await uow.messages.append(conversation.id, None, ['{"not": "a message"}'], utcnow())
            await uow.commit()
        run = await container.conversations.post_message(ADMIN, conversation.id, "hello")
        for _ in range(2):
            with pytest.raises(ValidationError):
                await container.worker.run_once()
            assert (await run_of(container, run.id)).status is RunStatus.RUNNING, "the claim stood"
            await until_lease_expired(container, run.id)
            assert await container.worker.sweep() == 1
        assert await container.worker.run_once(), "the next claim gives up"
        failed = await run_of(container, run.id)
        assert failed.status is RunStatus.FAILED
        assert failed.error is not None and failed.error.code == "segment_attempts_exhausted"


async def test_progress_resets_the_attempts(seeded: str) -> None:
    async with built(seeded, max_segment_attempts=1) as container:
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
        assert await container.worker.run_once()
        assert (await run_of(container, run.id)).claims == 0
        [pending] = (await container.runs.get_run(ADMIN, run.id)).pending
        await container.pending_calls.resolve_pending(
            ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
        )
        assert await container.worker.run_once()
        done = await run_of(container, run.id)
        assert done.status is RunStatus.COMPLETED, "every segment made progress: no attempt was spent"
        assert done.segment == 2


# 5. A cancel that arrives after the last persistence point of a segment still cancels.


class CancelWhileGating(PreApprovalPolicy):
    """Consulted when a gated call is about to suspend, i.e. after the segment's last persist."""

    def __init__(self) -> None:
        self.cancel: Callable[[], Awaitable[Any]] | None = None

    async def covering_authorization(
        self, workspace: str, tool_name: str, args: Any, now: datetime
    ) -> str | None:
        if self.cancel is not None:
            await self.cancel()
        return None


async def test_a_cancel_after_the_last_persist_wins_over_suspending(seeded: str) -> None:
    policy = CancelWhileGating()
    async with built(seeded, policy=policy) as container:
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        run = await container.conversations.post_message(ADMIN, conversation.id, GATED)

        async def cancel() -> None:
            view = await container.runs.cancel_run(ADMIN, run.id)
            assert view.run.status is RunStatus.RUNNING and view.run.cancel_requested

        policy.cancel = cancel
        assert await container.worker.run_once()
        policy.cancel = None

        cancelled = await run_of(container, run.id)
        assert cancelled.status is RunStatus.CANCELLED
        assert cancelled.awaiting_count == 0
        async with container.uow() as uow:
            assert await uow.pending.for_run(run.id) == [], "nobody is asked to decide"
            assert await uow.tool_calls.for_run(run.id) == []
        trail = await audit_trail(container, conversation.id)
        assert trail[-2:] == [("run.cancel_requested", {}), ("run.cancelled", {"calls_not_requested": 1})]

        follow_up = await container.conversations.post_message(ADMIN, conversation.id, "what happened?")
        assert await container.worker.run_once()
        answered = await run_of(container, follow_up.id)
        assert answered.status is RunStatus.COMPLETED
        [told] = json.loads((answered.output or "").removeprefix("RESULTS: "))
        assert told["error"]["code"] == "CANCELLED"


async def test_a_cancel_after_the_last_persist_wins_over_completing(seeded: str) -> None:
    async with built(seeded, lease_seconds=0.6) as container:
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        run = await container.conversations.post_message(ADMIN, conversation.id, "please refuse completion")
        async with completion_refused(seeded, "refuse completion"):
            # The answer is stored; writing the completion fails and the segment is retried later.
            with pytest.raises(sa_exc.DBAPIError):
                await container.worker.run_once()
        view = await container.runs.cancel_run(ADMIN, run.id)
        assert view.run.status is RunStatus.RUNNING and view.run.cancel_requested
        await until_lease_expired(container, run.id)
        assert await container.worker.sweep() == 1

        assert await container.worker.run_once()
        cancelled = await run_of(container, run.id)
        assert cancelled.status is RunStatus.CANCELLED
        assert cancelled.output is None
        assert (await container.conversations.get_conversation(ADMIN, conversation.id)).active_run_id is None
        async with container.uow() as uow:
            stored = await uow.messages.read(conversation.id)
        assert len(stored) == 2, "the answer stays in the log"
        assert [action for action, _ in await audit_trail(container, conversation.id)][-1] == "run.cancelled"
