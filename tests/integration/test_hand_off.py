"""The claim hand-off: with its worker loops running, the process that commits a message or a
decision runs the run's next segment in a free slot of its own worker, leased in that transaction,
so an approval turn commits five times (message, suspension; decision, the tool's effect, the end)
instead of seven and no claim statement is sent (`sursis/domain/hand_off.py`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.app.container import Container, build_container
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.records import Principal
from sursis.domain.states import Decision, PendingStatus, RunStatus
from sursis.infra.db.engine import create_engine
from sursis.infra.db.tables import runs
from sursis.infra.pg_notify import PostgresRunNotifier
from tests.conftest import make_settings
from tests.integration.round_trips import RoundTrips, count_round_trips
from tests.integration.test_turn_commits import GATED, POLICY_READ, assert_prepared_once_by_name

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
QUIET = 3600.0
"""Every background loop's interval: only the turn's own transactions are counted."""
SUSPEND_COMMITS = 2
"""The message, its run leased to this process's worker with the claim's audit row and event
(what the segment starts from read in the same transaction); the suspension."""
RESUME_COMMITS = 3
"""The decision, with the run leased again (and the resumed segment's start read); the tool's
effect with its outcome; the end."""
MESSAGE_READERS = 1
"""The message's conversation read (with its log after what the worker holds) by a reader, before
the transaction that takes it."""
DECISION_READERS = 1
"""The decision's call read (with its run, the run's log after what the worker holds and the calls
it resumes with) by a reader, before the transaction that decides it (PostgreSQL)."""
SUSPEND_ROUND_TRIPS = 3
"""PostgreSQL, what the driver sends once each statement is prepared on its connection: the
message (2: the conversation read with its log, in autocommit; the conversation taken, held as
the guard of the statement that writes the run leased with its audit rows and events: the whole
transaction, no `BEGIN`/`COMMIT`) and the suspension (1: one statement, the whole transaction).
Server transactions: 3, the read's and one per commit (the first turn adds the 3 policy reads)."""
RESUME_ROUND_TRIPS = 10
"""The decision (2: the call read in autocommit, with its run, the run's log and the pending calls
it resumes with and their outcomes; then the call decided, held as the guard of the statement that
writes the run leased to this process's worker with the audit rows and events: the whole
transaction, no `BEGIN`/`COMMIT`), the tool's effect (7: `BEGIN`, its own 3, its outcome, its
event, `COMMIT`), the end (1). Server transactions: 4, the read's and one per commit. An approval
turn: 13 round trips in 7 server transactions and 5 commits (16 before the decision was one
statement, 17 before the decision read the resumed calls, 20 before the message's
transaction was one statement; 23 before the conversation's claim read the log, and the decision
leased the run and read the log, in the same statement); counted
the same way, a turn whose segments are claimed sends 28 in 7 (34 before a suspension and an end
were one statement each)."""


def quiet_settings(seeded: str) -> Settings:
    """A worker of two slots whose background loops never wake on their own: only the turn's own
    transactions happen."""
    return make_settings(
        seeded,
        policy_cache_seconds=QUIET,
        worker_concurrency=2,
        worker_poll_seconds=QUIET,
        sweep_seconds=QUIET,
        lease_seconds=60,
        webhook_poll_seconds=QUIET,
        channel_poll_seconds=QUIET,
        reviewer_poll_seconds=QUIET,
        retention_sweep_seconds=QUIET,
    )


@pytest.fixture
async def container(seeded: str) -> AsyncIterator[Container]:
    built = build_container(quiet_settings(seeded))
    await built.start(run_worker=True)
    if isinstance(built.notifier, PostgresRunNotifier):
        await asyncio.wait_for(built.notifier.listening.wait(), 10)
    await asyncio.sleep(0.5)  # the loops' first passes, before anything is counted
    yield built
    await built.close()


async def _settled(url: str, run_id: uuid.UUID, status: RunStatus) -> None:
    """Until the run has `status`, read over an engine of its own (not counted)."""
    engine = create_engine(url)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            async with engine.connect() as conn:
                found = await conn.scalar(sa.select(runs.c.status).where(runs.c.id == run_id))
            if found == status.value:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"run {run_id} never reached {status}")
    finally:
        await engine.dispose()


async def test_an_approval_turn_handed_off_commits_five_times(
    container: Container, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with count_round_trips(container.uow.engine, monkeypatch) as sent:
        await _three_turns(container, seeded, sent)


async def _three_turns(container: Container, seeded: str, sent: RoundTrips) -> None:
    engine = container.uow.engine.sync_engine
    dialect = engine.dialect.name
    commits: list[Any] = []
    begins: list[Any] = []
    statements: list[str] = []
    sa.event.listen(engine, "commit", commits.append)
    sa.event.listen(engine, "begin", begins.append)
    sa.event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")

    for turn in range(3):
        commits.clear(), begins.clear(), statements.clear(), sent.clear()
        run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
        await _settled(seeded, run.id, RunStatus.SUSPENDED)
        await asyncio.sleep(0.05)  # the segment's last commit is in; nothing else may follow
        assert len(commits) == SUSPEND_COMMITS, f"turn {turn}: suspend path"
        readers = 2 if turn == 0 else 0  # the workspace's policy and ladder, read once
        assert len(begins) == SUSPEND_COMMITS + MESSAGE_READERS + readers, f"turn {turn}: suspend path"
        assert not [s for s in statements if "claimed" in s], "a handed-off run is not claimed"
        if dialect == "postgresql":
            first = POLICY_READ if turn == 0 else 0
            assert sent.round_trips() == SUSPEND_ROUND_TRIPS + first, (turn, sent.ours)
            assert sent.transactions() == SUSPEND_COMMITS + MESSAGE_READERS + first, (turn, sent.ours)
            assert_prepared_once_by_name(sent)

        async with container.uow() as uow:
            [pending] = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
        commits.clear(), begins.clear(), statements.clear(), sent.clear()
        await container.pending_calls.resolve_pending(
            ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
        )
        await _settled(seeded, run.id, RunStatus.COMPLETED)
        await asyncio.sleep(0.05)
        assert len(commits) == RESUME_COMMITS, f"turn {turn}: resume path"
        # SQLite reads the call in the decision's transaction.
        decision_readers = DECISION_READERS if dialect == "postgresql" else 0
        assert len(begins) == RESUME_COMMITS + decision_readers, f"turn {turn}: resume path"
        assert not [s for s in statements if "claimed" in s], "a handed-off run is not claimed"
        if dialect == "postgresql":
            assert sent.round_trips() == RESUME_ROUND_TRIPS, (turn, sent.ours)
            assert sent.transactions() == RESUME_COMMITS + DECISION_READERS, (turn, sent.ours)
            assert_prepared_once_by_name(sent)

        view = await container.runs.get_run(ADMIN, run.id)
        assert view.run.output == "replayed"
        assert view.run.segment == 2 and view.run.claims == 0

    async with container.uow() as uow:
        events = await uow.events.after(conversation.id, 0, 500)
    statuses = [
        e.data["status"] for e in events if e.type == "run.status" and e.data["run_id"] == str(run.id)
    ]
    # The stream a client reads is the one a claimed run gives.
    assert statuses == ["queued", "running", "suspended", "queued", "running"]
    assert [e.type for e in events if e.data.get("run_id") == str(run.id)][-1] == "run.completed"


async def test_without_a_free_slot_the_run_is_queued_for_any_worker(
    container: Container, seeded: str
) -> None:
    worker = container.worker
    held = [worker.reserve(), worker.reserve()]  # both slots of this worker
    assert all(held) and worker.reserve() is None
    assert not await worker.wait_idle(0.05), "reserved slots are not idle"
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
    async with container.uow() as uow:
        stored = await uow.runs.get(run.id)
    assert stored is not None and stored.status is RunStatus.QUEUED and stored.lease_owner is None
    for lease in held:
        assert lease is not None
        worker.cancel(lease)
    # A loop that found every slot reserved is woken when one is given back, and claims the run.
    await _settled(seeded, run.id, RunStatus.SUSPENDED)
