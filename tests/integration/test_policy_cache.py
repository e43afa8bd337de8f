"""The worker's pre-approval cache: a gated call reads the workspace's rules once, and a created or
revoked pre-approval reaches the next call at once — in this process by the service, in every other
process by `NOTIFY` — never after the cache's seconds run out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from sursis.app.container import Container, build_container
from sursis.domain.records import Principal
from sursis.domain.states import RunStatus
from sursis.infra.pg_notify import PostgresRunNotifier
from tests.conftest import call, eventually, make_settings, script

USER = Principal(id="user:bob", role="user", workspace="default")
OPERATOR = Principal(id="operator:alice", role="operator", workspace="default")
REPLAY = script([call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")], "done")
PG = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
"""Changes made by other processes: SQLite is served by one process, whose own changes the first
test covers, and its cache is live from the start."""
LONG = 3600.0
"""Longer than any test: whatever a call sees, it did not see because the cache's seconds ran out."""


async def listening(container: Container) -> Container:
    await container.start(run_worker=False)
    if isinstance(container.notifier, PostgresRunNotifier):
        await asyncio.wait_for(container.notifier.listening.wait(), 10)
    return container


@pytest.fixture
async def worker(seeded: str) -> AsyncIterator[Container]:
    built = await listening(build_container(make_settings(seeded, policy_cache_seconds=LONG)))
    yield built
    await built.close()


async def gated_turn(container: Container) -> RunStatus:
    """One turn with a gated call: COMPLETED when a pre-approval covered it, SUSPENDED if not."""
    conversation = await container.conversations.create_conversation(USER, "ops", None)
    run = await container.conversations.post_message(USER, conversation.id, REPLAY)
    assert await container.worker.run_once()
    return (await container.runs.get_run(USER, run.id)).run.status


def count_policy_reads(container: Container) -> list[str]:
    reads: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if "FROM authorizations" in statement:
            reads.append(statement)

    sa.event.listen(container.uow.engine.sync_engine, "before_cursor_execute", seen)
    return reads


async def test_rules_are_read_once_and_a_change_in_this_process_applies_to_the_next_call(
    worker: Container,
) -> None:
    reads = count_policy_reads(worker)
    assert await gated_turn(worker) is RunStatus.SUSPENDED
    assert await gated_turn(worker) is RunStatus.SUSPENDED
    assert len(reads) == 1, "the second call found the workspace's (empty) rules in the cache"

    rule = await worker.authorizations.create(OPERATOR, tool_name="replay_dlq_event", reason="drill")
    assert await gated_turn(worker) is RunStatus.COMPLETED, "a new pre-approval covers the next call"
    await worker.authorizations.revoke(OPERATOR, rule.id)
    assert await gated_turn(worker) is RunStatus.SUSPENDED, "a revoked one covers nothing, at once"


@PG
async def test_a_change_made_by_another_process_reaches_the_worker_by_notify(
    worker: Container, seeded: str
) -> None:
    api = build_container(make_settings(seeded))
    try:
        assert await gated_turn(worker) is RunStatus.SUSPENDED  # the empty rules are now cached
        rule = await api.authorizations.create(OPERATOR, tool_name="replay_dlq_event", reason="drill")
        assert await eventually(lambda: _covered(worker), limit=10)
        await api.authorizations.revoke(OPERATOR, rule.id)
        assert await eventually(lambda: _gated(worker), limit=10)
    finally:
        await api.close()


async def _covered(container: Container) -> bool:
    return await gated_turn(container) is RunStatus.COMPLETED


async def _gated(container: Container) -> bool:
    return await gated_turn(container) is RunStatus.SUSPENDED


@PG
async def test_the_cache_serves_nothing_while_the_worker_cannot_hear_changes(worker: Container) -> None:
    reads = count_policy_reads(worker)
    assert await gated_turn(worker) is RunStatus.SUSPENDED
    assert await gated_turn(worker) is RunStatus.SUSPENDED
    assert len(reads) == 1

    # The listening connection is killed from the server's side: changes may be missed from now on.
    async with worker.uow.engine.connect() as conn:
        killed = await conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
                " AND pid <> pg_backend_pid()"
            )
        )
        assert killed.all(), "the worker's listening connection was found"

    async def read_again() -> bool:
        assert await gated_turn(worker) is RunStatus.SUSPENDED
        return len(reads) > 1

    assert await eventually(read_again, limit=10), "the rules cached before the loss were dropped"
