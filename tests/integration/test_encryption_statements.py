"""Encryption adds no statement, transaction or round trip to a turn: it is a per-value encode and
decode at the repository boundary (docs/performance-history.md)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from sursis.app.container import build_container
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.states import Decision, PendingStatus, RunStatus
from tests.api.test_encryption_at_rest import new_key
from tests.conftest import make_settings
from tests.integration.test_turn_commits import ADMIN, GATED


async def counted_turns(database_url: str, keys: str | None) -> list[tuple[int, int, int]]:
    """(commits, transactions, statements) of each phase of two approval turns."""
    container = build_container(make_settings(database_url, encryption_keys=keys))
    engine = container.uow.engine.sync_engine
    counts = {"commit": 0, "begin": 0, "statement": 0}

    def count(kind: str) -> Any:
        def listener(*args: Any) -> None:
            if kind != "statement" or not args[2].startswith("BEGIN"):
                counts[kind] += 1

        return listener

    listeners = [
        (name, count(name if name != "before_cursor_execute" else "statement"))
        for name in ("commit", "begin", "before_cursor_execute")
    ]
    for name, listener in listeners:
        sa.event.listen(engine, name, listener)
    phases: list[tuple[int, int, int]] = []

    def phase() -> None:
        phases.append((counts["commit"], counts["begin"], counts["statement"]))
        counts.update(commit=0, begin=0, statement=0)

    try:
        conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
        for _ in range(2):
            counts.update(commit=0, begin=0, statement=0)
            run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
            assert await container.worker.run_once()
            phase()
            async with container.uow() as uow:
                [pending] = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
            counts.update(commit=0, begin=0, statement=0)
            await container.pending_calls.resolve_pending(
                ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
            )
            assert await container.worker.run_once()
            phase()
            view = await container.runs.get_run(ADMIN, run.id)
            assert view.run.status is RunStatus.COMPLETED and view.run.output == "replayed"
    finally:
        for name, listener in listeners:
            sa.event.remove(engine, name, listener)
        await container.close()
    return phases


async def test_a_turn_sends_the_same_statements_with_and_without_a_keyring(seeded: str) -> None:
    plain = await counted_turns(seeded, None)
    sealed = await counted_turns(seeded, new_key("k1"))
    assert sealed == plain
    assert all(statements > 0 for _, _, statements in plain)
