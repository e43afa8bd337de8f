"""An idle service sleeps: while a worker hears the other processes (PostgreSQL with LISTEN up; an
SQLite file through its `data_version` watch), its loops make no statement at all between wake-ups,
however short their polls are set, and what falls due with nothing else happening (an approval's
expiry) is still done on time. A commit of another process wakes the sleeping worker at once, not at
its safety poll. With wake-ups off (`SURSIS_DATABASE_LISTEN_URL=off`) the loops poll."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.app.container import Container, build_container
from sursis.domain.states import PendingStatus, RunStatus
from tests.conftest import make_settings
from tests.integration.test_hand_off import ADMIN
from tests.integration.test_turn_commits import GATED

SHORT = 0.1
"""Every loop's own poll: a loop that polled would make tens of statements a second."""


def _short_polls(database_url: str, **overrides: Any) -> Any:
    return make_settings(
        database_url,
        worker_poll_seconds=SHORT,
        sweep_seconds=SHORT,
        webhook_poll_seconds=SHORT,
        reviewer_poll_seconds=SHORT,
        audit_seal_seconds=SHORT,
        approval_timeout_seconds=5,
        **overrides,
    )


@pytest.fixture
async def worker(seeded: str) -> AsyncIterator[Container]:
    settings = _short_polls(seeded)
    assert settings.idle_poll_seconds == 30, "the default safety poll"
    built = build_container(settings)
    await built.start(run_worker=True)
    deadline = time.monotonic() + 10
    while not built.hearing.hears_others():
        assert time.monotonic() < deadline, "the worker never heard the other processes"
        await asyncio.sleep(0.05)
    yield built
    await built.close()


def _count_statements(container: Container, at: list[float] | None = None) -> list[str]:
    """The statements the container's engine sends from now on (and, in `at`, when)."""
    seen: list[str] = []

    def statement(_conn: Any, _cursor: Any, text: str, *_: Any) -> None:
        seen.append(text)
        if at is not None:
            at.append(time.monotonic())

    sa.event.listen(container.uow.engine.sync_engine, "before_cursor_execute", statement)
    return seen


async def test_an_idle_worker_makes_no_statement_while_it_hears_the_others(worker: Container) -> None:
    await asyncio.sleep(1.0)  # the first passes of every loop, at start
    seen = _count_statements(worker)
    await asyncio.sleep(3.0)
    assert worker.hearing.hears_others()
    assert seen == [], f"an idle worker polled: {seen[:5]}"


async def test_with_wake_ups_off_the_loops_poll(seeded: str) -> None:
    built = build_container(_short_polls(seeded, database_listen_url="off"))
    await built.start(run_worker=True)
    try:
        await asyncio.sleep(1.0)
        seen = _count_statements(built)
        await asyncio.sleep(3.0)
        assert not built.hearing.hears_others()
        # Nothing can wake it, so it polls: here at least once per loop and second.
        assert len(seen) >= 3 * 3, len(seen)
    finally:
        await built.close()


async def test_another_processes_commit_wakes_the_sleeping_worker(worker: Container, seeded: str) -> None:
    # Another process (its own engine and pools, no worker) accepts a message: the sleeping worker,
    # whose loops wait 30 s between passes, takes the run well before that.
    await asyncio.sleep(1.0)
    api = build_container(make_settings(seeded, worker_poll_seconds=SHORT))
    await api.start(run_worker=False)
    try:
        conversation = await api.conversations.create_conversation(ADMIN, "ops", None)
        started = time.monotonic()
        run = await api.conversations.post_message(ADMIN, conversation.id, GATED)
        while (view := await api.runs.get_run(ADMIN, run.id)).run.status is not RunStatus.SUSPENDED:
            assert time.monotonic() - started < 5, f"still {view.run.status} after 5 s"
            await asyncio.sleep(0.05)
    finally:
        await api.close()


async def test_an_approval_expires_on_time_in_a_sleeping_service(worker: Container) -> None:
    conversation = await worker.conversations.create_conversation(ADMIN, "ops", None)
    run = await worker.conversations.post_message(ADMIN, conversation.id, GATED)
    deadline = time.monotonic() + 20
    while (view := await worker.runs.get_run(ADMIN, run.id)).run.status is not RunStatus.SUSPENDED:
        assert time.monotonic() < deadline, view.run.status
        await asyncio.sleep(0.05)
    [pending] = view.pending
    at: list[float] = []
    seen = _count_statements(worker, at)
    quiet_from = time.monotonic() + 0.5  # what the suspension itself stirred is done by then
    # The window ends half a second before the expiry by the wall clock, read now: the time this
    # test took to see the suspension (long on a loaded machine) is already behind it.
    quiet_until = time.monotonic() + (pending.expires_at - datetime.now(UTC)).total_seconds() - 0.5
    # Nothing happens from now on but time: the sweeper sleeps until the call's expiry (the test
    # reads nothing while it waits, so every statement of that window is a loop's).
    await asyncio.sleep(max(0.0, quiet_until - time.monotonic()))
    while (view := await worker.runs.get_run(ADMIN, run.id)).run.status is not RunStatus.COMPLETED:
        assert time.monotonic() < deadline, view.run.status
        await asyncio.sleep(0.1)
    expired = await worker.pending_calls.get_pending(ADMIN, pending.correlation_id)
    assert expired.status is PendingStatus.EXPIRED
    assert expired.resolved_at is not None
    late = (expired.resolved_at - pending.expires_at).total_seconds()
    assert late < 2.0, f"expired {late:.2f} s after its deadline"
    if worker.hearing.hears_others():
        # The wait until the expiry cost no statement: the sweeper slept, it did not poll.
        waiting = [text for text, when in zip(seen, at, strict=True) if quiet_from <= when <= quiet_until]
        assert quiet_until - quiet_from > 1.0
        assert waiting == [], f"{len(waiting)} statements while the service waited: {waiting[:3]}"
