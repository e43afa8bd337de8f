"""What an approval turn commits: counted on the engine, so the count cannot creep back up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.app.container import Container, build_container
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.records import Principal
from sursis.domain.states import Decision, PendingStatus, RunStatus
from sursis.infra.pg_notify import PostgresRunNotifier
from tests.conftest import call, make_settings, script
from tests.integration.round_trips import RoundTrips, count_round_trips

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "replayed")

SUSPEND_COMMITS = 3
"""The message accepted (run queued), the claim, and the suspension with the prompt and the
model's call (nothing acted on the call, so it is stored with the suspension)."""
RESUME_COMMITS = 4
"""The decision, the claim, the tool's own effect with its outcome and `tool.result` event, and
the run's end with the tool's result message, the final answer, its last text delta and the
closing events."""


SUSPEND_STATEMENTS = {"sqlite": 15, "postgresql": 5}
"""SQLite: message (5: the conversation read, then taken, the run, its audit row, its event), claim
with the segment's start (4: the run, the log, audit, event), suspension (6: the run, the pending call, one look-up for webhooks or channel bindings, messages,
audit rows, events).

PostgreSQL holds every write whose outcome nobody reads to the transaction's last statement
(`held`), which also answers the delivery look-up, and a claim reads the run's log in the same
statement: message (2: the conversation read; taken, as the guard of the statement that writes the
run, audit and event), claim (2: the
run with its log; audit and event), suspension (1: the run's state, conditional on the lease, as the
guard of the statement that writes the pending call, messages, audit and events). Each event's
insert there also takes the conversation's lock and sends the notifications.

The workspace's policy and ladder (2 statements, one reader) and its pre-approvals of the gated tool
(1) are read once (`POLICY_READ`), by the first call; later calls find them in the worker's policy
caches until a change is notified."""
POLICY_READ = 3
POLICY_READERS = 2
RESUME_STATEMENTS = {"sqlite": 23, "postgresql": 12}
"""SQLite: resolve (6: the call read and decided, the run, the delivery look-up, audit, events),
claim with the segment's start (6: the run, the log, pending calls, stored outcomes, audit, event),
the tool's effect (5: its own 3, the outcome, the event), the end (6: run, conversation, the
delivery look-up, messages, audit, events).

PostgreSQL: resolve (3: the call read; the call decided with the run re-queued; audit and
events), claim (3: the run
with its log, the pending calls with their stored outcomes; audit and event), the tool's effect (5: its own 3, the
outcome; the event), the end (1: the run's end, conditional on the lease, guarding the conversation
freed, messages, audit, events)."""
SUSPEND_TRANSACTIONS = 4
"""The message's conversation read (a reader), the message, claim (the segment's start read in it),
suspension; the first turn adds the policy reads (readers: a deferred BEGIN on SQLite; on
PostgreSQL autocommit, which SQLAlchemy still counts)."""
RESUME_TRANSACTIONS = 4

SUSPEND_ROUND_TRIPS = 7
"""PostgreSQL, what the driver sends (`round_trips`) once each statement is prepared on its
connection: message (2: the conversation read in autocommit; taken, held as the guard of the
statement that writes the run with its audit row and event, sent without `BEGIN` and `COMMIT`), claim (4: `BEGIN`, the claim with the log, audit and event, `COMMIT`),
suspension (1: one statement, the whole transaction, sent without `BEGIN` and `COMMIT`). The first
turn adds the policy reads (3, each a reader's statement in autocommit)."""
SUSPEND_SERVER_TRANSACTIONS = 4
"""The message's read and statement, the claim's transaction, and the suspension's statement (each
statement outside `BEGIN` a transaction of its own on the server); the first turn adds the 3 policy
reads."""
RESUME_ROUND_TRIPS = 18
"""Resolve (5: `BEGIN`, the call read, decided with the run re-queued, audit and events,
`COMMIT`), claim (5: `BEGIN`, the claim with the log, the pending calls with their outcomes, audit
and event, `COMMIT`), the tool's effect (7: `BEGIN`, its own 3, its outcome, its event, `COMMIT`),
the end (1: one statement)."""
RESUME_SERVER_TRANSACTIONS = 4
"""Resolve, claim, the tool's effect, and the end's statement: with the suspension's 4, 8 server
transactions in an approval turn (7 before the message's transaction was one statement, its read
one of its own; 17 before a state change was one statement and a direct
session's statements were named; the first turn's policy reads add 3)."""


@pytest.fixture
async def container(seeded: str) -> AsyncIterator[Container]:
    """The composition root with its policy cache live: on PostgreSQL that takes the listening
    connection (a cache that might miss a revocation serves nothing); its seconds outlast the test."""
    built = build_container(make_settings(seeded, policy_cache_seconds=3600))
    await built.start(run_worker=False)
    if isinstance(built.notifier, PostgresRunNotifier):
        await asyncio.wait_for(built.notifier.listening.wait(), 10)
    yield built
    await built.close()


async def test_an_approval_turn_makes_three_commits_to_suspend_and_four_to_finish(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    with count_round_trips(container.uow.engine, monkeypatch) as sent:
        await _three_turns(container, sent)


async def _three_turns(container: Container, sent: RoundTrips) -> None:
    engine = container.uow.engine.sync_engine
    commits: list[Any] = []
    begins: list[Any] = []
    statements: list[str] = []
    sa.event.listen(engine, "commit", commits.append)
    sa.event.listen(engine, "begin", begins.append)
    sa.event.listen(
        engine,
        "before_cursor_execute",
        lambda *a: None if a[2].startswith("BEGIN") else statements.append(a[2]),  # SQLite's BEGIN IMMEDIATE
    )
    worker = container.worker
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    dialect = engine.dialect.name

    for turn in range(3):  # the counts hold on every turn, not only on a fresh conversation
        commits.clear(), begins.clear(), statements.clear(), sent.clear()
        run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
        assert await worker.run_once()
        assert len(commits) == SUSPEND_COMMITS, f"turn {turn}: suspend path"
        first = POLICY_READ if turn == 0 else 0
        assert len(statements) == SUSPEND_STATEMENTS[dialect] + first, (turn, statements)
        readers = POLICY_READERS if turn == 0 else 0
        assert len(begins) == SUSPEND_TRANSACTIONS + readers, f"turn {turn}: suspend path"
        if dialect == "postgresql":
            assert sent.round_trips() == SUSPEND_ROUND_TRIPS + first, (turn, sent.ours)
            assert sent.transactions() == SUSPEND_SERVER_TRANSACTIONS + first, (turn, sent.ours)
            assert_prepared_once_by_name(sent)

        async with container.uow() as uow:
            [pending] = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
        commits.clear(), begins.clear(), statements.clear(), sent.clear()
        await container.pending_calls.resolve_pending(
            ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
        )
        assert await worker.run_once()
        assert len(commits) == RESUME_COMMITS, f"turn {turn}: resume path"
        assert len(statements) == RESUME_STATEMENTS[dialect], (turn, statements)
        assert len(begins) == RESUME_TRANSACTIONS, f"turn {turn}: resume path"
        if dialect == "postgresql":
            assert sent.round_trips() == RESUME_ROUND_TRIPS, (turn, sent.ours)
            assert sent.transactions() == RESUME_SERVER_TRANSACTIONS, (turn, sent.ours)
            assert_prepared_once_by_name(sent)

        view = await container.runs.get_run(ADMIN, run.id)
        assert view.run.status is RunStatus.COMPLETED
        assert view.run.output == "replayed"


def assert_prepared_once_by_name(sent: RoundTrips) -> None:
    """Every statement prepared is named, and none twice on one connection: the server parses and
    plans a statement once per connection (a direct session; behind a pooler they are unnamed)."""
    assert all(p.named for p in sent.prepares()), sent.prepares()
    assert sent.prepared_again() == []


async def test_the_events_of_a_turn_are_all_written(container: Container) -> None:
    """Fewer transactions, same stream: every event a client saw before is still there, in order."""
    worker = container.worker
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
    assert await worker.run_once()
    async with container.uow() as uow:
        [pending] = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
    await container.pending_calls.resolve_pending(ADMIN, pending.correlation_id, Resolution(Decision.APPROVE))
    assert await worker.run_once()

    async with container.uow() as uow:
        events = await uow.events.after(conversation.id, 0, 100)
    kinds = [e.type for e in events]
    tail = kinds[kinds.index("pending.resolved") :]
    assert tail.count("tool.result") == 1
    assert tail.index("tool.result") < tail.index("message.delta") < tail.index("run.completed")
    [result] = [e for e in events if e.type == "tool.result"]
    assert result.data["ok"] is True
    assert result.data["tool_call_id"] == pending.tool_call_id
    assert result.data["result"]["event_id"] == "evt_1001"
    [delta] = [e for e in events if e.type == "message.delta" and e.data["run_id"] == str(run.id)]
    assert delta.data["text"] == "replayed"
