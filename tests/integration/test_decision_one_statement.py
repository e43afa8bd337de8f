"""A decision that frees its run's last awaiting call, with a worker slot of this process waiting to
resume the run, is on PostgreSQL one read and one statement (`PendingCallRepository.seen_for_decision`,
`decide(seen=)`): the call read in autocommit with its run, then the decision held as the guard of
the statement that leases the run and writes the audit rows and events. That statement holds only
while the run is the one read; when it does not, it writes nothing and the decision is made again
in a transaction of its own, so a race still has one winner and one `stale`."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.app.container import Container, build_container
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import PendingCallService, Resolution
from sursis.domain.errors import Stale
from sursis.domain.ports import HeldConditionFailed, LeaseAhead, SeenDecision
from sursis.domain.records import Principal
from sursis.domain.states import Decision, PendingStatus, RunStatus
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.pending import SqlPendingCallRepository
from tests.integration.test_hand_off import _settled, quiet_settings
from tests.integration.test_turn_commits import GATED

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
OTHER = Principal(id="admin:other", role=Role.ADMIN, workspace=None)
DECIDED = ("pending.approved", "pending.denied")


@pytest.fixture
async def container(seeded: str) -> AsyncIterator[Container]:
    if not seeded.startswith("postgresql"):
        pytest.skip("SQLite reads and decides in one transaction")
    built = build_container(quiet_settings(seeded))
    await built.start(run_worker=True)
    yield built
    await built.close()


async def _suspended(container: Container, seeded: str) -> tuple[uuid.UUID, Any]:
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
    await _settled(seeded, run.id, RunStatus.SUSPENDED)
    async with container.uow() as uow:
        [pending] = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
    return run.id, pending


async def _audit_actions(container: Container, correlation_id: uuid.UUID) -> list[tuple[str, str]]:
    async with container.uow() as uow:
        rows = await uow.session.execute(
            sa.select(t.audit_log.c.action, t.audit_log.c.actor)
            .where(t.audit_log.c.correlation_id == correlation_id)
            .order_by(t.audit_log.c.id)
        )
        return [(row.action, row.actor) for row in rows]


def _attempts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each attempt of a decision had a call read before its transaction (`seen`)."""
    attempts: list[bool] = []
    resolve = PendingCallService._resolve

    async def counted(self: PendingCallService, *args: Any) -> Any:
        attempts.append(args[-1] is not None)
        return await resolve(self, *args)

    monkeypatch.setattr(PendingCallService, "_resolve", counted)
    return attempts


async def test_the_statement_writes_nothing_when_the_call_was_decided_since_the_read(
    container: Container, seeded: str
) -> None:
    run_id, pending = await _suspended(container, seeded)
    async with container.uow.reader() as reader:
        seen = await reader.pending.seen_for_decision(pending.correlation_id, {})
    assert seen is not None and seen.ahead is not None, "the run awaits this call alone"
    assert seen.call.correlation_id == pending.correlation_id
    # Another decision commits between the read and the statement (no slot: the run is queued).
    async with container.uow() as uow:
        other = await uow.pending.decide(
            pending,
            PendingStatus.DENIED,
            pending.created_at + timedelta(seconds=1),
            resolved_by=OTHER.id,
            reason="no",
            resolution={"decision": "deny"},
        )
        await uow.commit()
    assert other is True
    lease = LeaseAhead("worker:test", pending.expires_at - timedelta(minutes=1), 0)
    async with container.uow() as uow:
        held = await uow.pending.decide(
            pending,
            PendingStatus.APPROVED,
            pending.created_at + timedelta(seconds=2),
            resolved_by=ADMIN.id,
            reason=None,
            resolution={"decision": "approve"},
            lease=lease,
            seen=seen,
        )
        assert held is True, "held to the commit"
        with pytest.raises(HeldConditionFailed):
            await uow.commit()
    async with container.uow() as uow:
        stored = await uow.pending.get(pending.correlation_id)
        run = await uow.runs.get(run_id)
    assert stored is not None and stored.status is PendingStatus.DENIED and stored.resolved_by == OTHER.id
    assert run is not None and run.lease_owner != "worker:test", "the run was not leased by the loser"


async def test_a_decision_that_lost_the_race_after_its_read_is_stale_and_written_once(
    container: Container, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, pending = await _suspended(container, seeded)
    read = SqlPendingCallRepository.seen_for_decision

    async def then_decided_elsewhere(self: SqlPendingCallRepository, *args: Any) -> SeenDecision | None:
        seen = await read(self, *args)
        monkeypatch.setattr(SqlPendingCallRepository, "seen_for_decision", read)
        await container.pending_calls.resolve_pending(
            OTHER, pending.correlation_id, Resolution(Decision.APPROVE)
        )
        return seen

    monkeypatch.setattr(SqlPendingCallRepository, "seen_for_decision", then_decided_elsewhere)
    attempts = _attempts(monkeypatch)
    with pytest.raises(Stale) as lost:
        await container.pending_calls.resolve_pending(
            ADMIN, pending.correlation_id, Resolution(Decision.DENY)
        )
    assert lost.value.extra["resolved_by"] == OTHER.id
    # The other decision (one statement), then this one: its statement did not hold, so again.
    assert attempts == [True, True, False]
    await _settled(seeded, run_id, RunStatus.COMPLETED)
    decided = [a for a in await _audit_actions(container, pending.correlation_id) if a[0] in DECIDED]
    assert decided == [("pending.approved", OTHER.id)]


async def test_a_run_that_changed_since_the_read_is_decided_in_a_transaction_of_its_own(
    container: Container, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, pending = await _suspended(container, seeded)
    read = SqlPendingCallRepository.seen_for_decision
    tried: list[bool] = []

    async def as_an_older_segment(self: SqlPendingCallRepository, *args: Any) -> SeenDecision | None:
        seen = await read(self, *args)
        assert seen is not None and seen.ahead is not None
        # What a read of the run one segment earlier would have seen: the guard does not hold.
        ahead = seen.ahead
        older = dataclasses.replace(ahead, run=dataclasses.replace(ahead.run, segment=ahead.run.segment - 1))
        tried.append(True)
        return SeenDecision(seen.call, older)

    monkeypatch.setattr(SqlPendingCallRepository, "seen_for_decision", as_an_older_segment)
    attempts = _attempts(monkeypatch)
    resolved = await container.pending_calls.resolve_pending(
        ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
    )
    assert tried == [True]
    assert attempts == [True, False], "the statement did not hold: decided again in a transaction"
    assert resolved.status is PendingStatus.APPROVED and resolved.resolved_by == ADMIN.id
    await _settled(seeded, run_id, RunStatus.COMPLETED)
    async with container.uow() as uow:
        run = await uow.runs.get(run_id)
        events = await uow.events.after(run.conversation_id if run else uuid.uuid4(), 0, 500)
    assert run is not None and run.output == "replayed" and run.segment == 2
    decided = [a for a in await _audit_actions(container, pending.correlation_id) if a[0] in DECIDED]
    assert decided == [("pending.approved", ADMIN.id)]
    statuses = [e.data["status"] for e in events if e.type == "run.status"]
    assert statuses == ["queued", "running", "suspended", "queued", "running"]


async def test_a_decision_with_its_run_read_is_one_statement(
    container: Container, seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, pending = await _suspended(container, seeded)
    attempts = _attempts(monkeypatch)
    await container.pending_calls.resolve_pending(ADMIN, pending.correlation_id, Resolution(Decision.APPROVE))
    assert attempts == [True]
    await _settled(seeded, run_id, RunStatus.COMPLETED)
    async with container.uow() as uow:
        run = await uow.runs.get(run_id)
        stored = await uow.pending.get(pending.correlation_id)
    assert run is not None and run.segment == 2 and run.awaiting_count == 0 and run.output == "replayed"
    assert stored is not None and stored.status is PendingStatus.APPROVED and stored.resolved_by == ADMIN.id
    assert [a for a in await _audit_actions(container, pending.correlation_id) if a[0] in DECIDED] == [
        ("pending.approved", ADMIN.id)
    ]


async def test_concurrent_decisions_of_one_call_have_one_winner(container: Container, seeded: str) -> None:
    run_id, pending = await _suspended(container, seeded)
    outcomes = await asyncio.gather(
        container.pending_calls.resolve_pending(ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)),
        container.pending_calls.resolve_pending(OTHER, pending.correlation_id, Resolution(Decision.DENY)),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], Stale), outcomes
    await _settled(seeded, run_id, RunStatus.COMPLETED)
    decided = [a for a in await _audit_actions(container, pending.correlation_id) if a[0] in DECIDED]
    assert len(decided) == 1, decided
    async with container.uow() as uow:
        run = await uow.runs.get(run_id)
    assert run is not None and run.segment == 2, "resumed once"
