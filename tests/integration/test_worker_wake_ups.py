"""A worker's idle loops are woken one at a time: a queued run costs at most two claim attempts (its
claim, and one by the loop its claimer wakes next), not one per idle loop, and a burst is still taken
by as many loops as it needs. Before, four idle loops made four attempts for one queued run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.app.container import Container, build_container
from sursis.domain.states import RunStatus
from sursis.infra.db.tables import runs
from sursis.infra.pg_notify import PostgresRunNotifier
from tests.conftest import make_settings
from tests.integration.test_hand_off import ADMIN
from tests.integration.test_turn_commits import GATED

QUIET = 3600.0


@pytest.fixture
async def worker_process(seeded: str) -> AsyncIterator[Container]:
    """A worker with four idle loops. On SQLite its queue is polled every half second (nothing else
    tells it of the API's runs); on PostgreSQL it hears of them by NOTIFY alone, so that a slow
    machine's polls are not counted as wake-ups."""
    settings = make_settings(
        seeded,
        worker_concurrency=4,
        worker_poll_seconds=QUIET if seeded.startswith("postgresql") else 0.5,
        sweep_seconds=QUIET,
        webhook_poll_seconds=QUIET,
        channel_poll_seconds=QUIET,
        reviewer_poll_seconds=QUIET,
        retention_sweep_seconds=QUIET,
    )
    built = build_container(settings)
    await built.start(run_worker=True)
    if isinstance(built.notifier, PostgresRunNotifier):
        await asyncio.wait_for(built.notifier.listening.wait(), 10)
    await asyncio.sleep(0.5)
    yield built
    await built.close()


@pytest.fixture
async def api_process(seeded: str) -> AsyncIterator[Container]:
    """An API without a worker: its messages are queued for any worker."""
    built = build_container(make_settings(seeded))
    await built.start(run_worker=False)
    yield built
    await built.close()


async def _all_suspended(container: Container, ids: list[Any]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        async with container.uow.engine.connect() as conn:
            found = (await conn.execute(sa.select(runs.c.status).where(runs.c.id.in_(ids)))).scalars().all()
        if len(found) == len(ids) and all(s == RunStatus.SUSPENDED.value for s in found):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not all suspended: {found}")


@pytest.mark.parametrize("burst", [1, 3])
async def test_queued_runs_cost_one_claim_attempt_each_not_one_per_idle_loop(
    worker_process: Container, api_process: Container, burst: int
) -> None:
    claims: list[str] = []
    sa.event.listen(
        worker_process.uow.engine.sync_engine,
        "before_cursor_execute",
        lambda *a: claims.append(a[2]) if "segment=(runs.segment +" in a[2] else None,
    )
    conversations = [
        await api_process.conversations.create_conversation(ADMIN, "ops", "default") for _ in range(burst)
    ]
    posted = await asyncio.gather(
        *(api_process.conversations.post_message(ADMIN, c.id, GATED) for c in conversations)
    )
    assert all(r.status is RunStatus.QUEUED for r in posted)
    await _all_suspended(api_process, [r.id for r in posted])
    await asyncio.sleep(0.3)  # a loop woken by the last claimer has looked by now
    # Each run was claimed once; each claimer wakes one more loop, and the last one finds nothing;
    # a wake-up that arrives while a loop is already looking may cost one more. With every idle
    # loop woken by each notification, and a claim after every segment, this was 3 per run and more.
    assert burst <= len(claims) <= 2 * burst, len(claims)
