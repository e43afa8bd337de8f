"""A run's suspension and its end are conditional on the worker's lease. On PostgreSQL that
condition is the guard of the one statement that writes the whole state change (`held.Guard`):
a worker that lost its lease writes nothing, not a pending call, an audit row or an event, and
stops as it did when the update was a statement of its own. Both databases."""

from __future__ import annotations

import uuid
from typing import Any

from structlog.testing import capture_logs

from sursis.app.container import Container
from sursis.domain.states import RunStatus
from sursis.infra.db.tables import runs
from tests.conftest import script
from tests.integration.test_durability import (
    ADMIN,
    GATED,
    CancelWhileGating,
    audit_trail,
    built,
    run_of,
)


async def take_lease(container: Container, run_id: uuid.UUID) -> None:
    """Another worker holds the run now (as after the sweeper re-queued it and a claim)."""
    async with container.uow.engine.begin() as conn:
        await conn.execute(runs.update().where(runs.c.id == run_id).values(lease_owner="another-worker"))


async def events_of(container: Container, conversation_id: uuid.UUID) -> list[str]:
    async with container.uow() as uow:
        return [e.type for e in await uow.events.after(conversation_id, 0, 100)]


async def test_a_suspension_after_the_lease_was_lost_writes_nothing(seeded: str) -> None:
    policy = CancelWhileGating()
    async with built(seeded, policy=policy) as container:
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
        trail, events = None, None

        async def lose_lease() -> None:
            nonlocal trail, events
            trail = await audit_trail(container, conversation.id)
            events = await events_of(container, conversation.id)
            await take_lease(container, run.id)

        policy.cancel = lose_lease
        with capture_logs() as logs:
            await container.worker.run_once()
        policy.cancel = None

        assert "run.lease_lost" in [entry["event"] for entry in logs]
        held = await run_of(container, run.id)
        assert held.status is RunStatus.RUNNING and held.lease_owner == "another-worker"
        async with container.uow() as uow:
            assert await uow.pending.for_run(run.id) == []
        assert await audit_trail(container, conversation.id) == trail
        assert await events_of(container, conversation.id) == events


async def test_an_end_after_the_lease_was_lost_writes_nothing(seeded: str) -> None:
    async with built(seeded) as container:
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        run = await container.conversations.post_message(ADMIN, conversation.id, script("done"))
        finisher = container.worker._runner.finisher
        original = finisher.finish

        async def finish_after_losing(*args: Any, **kwargs: Any) -> RunStatus:
            await take_lease(container, run.id)
            trail[:] = await audit_trail(container, conversation.id)
            return await original(*args, **kwargs)

        trail: list[object] = []
        finisher.finish = finish_after_losing  # type: ignore[method-assign]
        with capture_logs() as logs:
            await container.worker.run_once()

        assert "run.lease_lost" in [entry["event"] for entry in logs]
        held = await run_of(container, run.id)
        assert held.status is RunStatus.RUNNING and held.output is None
        assert (
            await container.conversations.get_conversation(ADMIN, conversation.id)
        ).active_run_id == run.id
        assert await audit_trail(container, conversation.id) == trail
        assert "run.completed" not in await events_of(container, conversation.id)
