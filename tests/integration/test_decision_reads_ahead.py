"""The decision that frees a suspended run's last awaiting call and leases the run
(`PendingCallRepository.decide(lease=)`, PostgreSQL) reads, in the same statement, the calls the run
resumes with and their outcomes; the transaction's `with_outcomes` then answers what a statement of
its own would have, the decided call as the decision wrote it. A decision that saw another call of
the run still awaiting reads nothing ahead (that call's decision may commit after its snapshot)."""

from __future__ import annotations

from datetime import timedelta

from sursis.app.container import Container
from sursis.domain.access import Role
from sursis.domain.ports import LeaseAhead
from sursis.domain.records import PendingCall, Principal
from sursis.domain.states import PendingStatus, RunStatus
from sursis.infra.db.repositories.decision_statements import OUTCOMES_AHEAD_KEY
from tests.conftest import call, script

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
TWO_GATED = script(
    [
        call("replay_dlq_event", event_id="evt_1001", reason="retry"),
        call("replay_dlq_event", event_id="evt_1002", reason="retry"),
    ],
    "replayed",
)


async def _decide(
    container: Container, pending: PendingCall, lease: LeaseAhead, ids: list[str]
) -> tuple[bool | None, bool]:
    async with container.uow() as uow:
        requeued = await uow.pending.decide(
            pending,
            PendingStatus.APPROVED,
            lease.until - timedelta(minutes=5),
            resolved_by=ADMIN.id,
            reason=None,
            resolution={"decision": "approve"},
            lease=lease,
        )
        read_ahead = OUTCOMES_AHEAD_KEY in uow.session.info
        if requeued and read_ahead:
            ahead = await uow.pending.with_outcomes(pending.conversation_id, ids)
            assert OUTCOMES_AHEAD_KEY not in uow.session.info, "read ahead once"
            again = await uow.pending.with_outcomes(pending.conversation_id, ids)
            # Calls of one response share their `created_at`: either read orders them as it finds them.
            assert _decided(ahead[0]) == _decided(again[0])
            assert ahead[1] == again[1]
            assert all(c.status is PendingStatus.APPROVED for c in ahead[0])
        await uow.commit()
    return requeued, read_ahead


def _decided(calls: list[PendingCall]) -> list[tuple[object, ...]]:
    return sorted(
        (str(c.correlation_id), c.status, str(c.resolution), c.resolved_by, c.resolved_at, c.seal_problem)
        for c in calls
    )


async def test_the_last_decision_reads_the_resumed_calls_with_it(container: Container) -> None:
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    run = await container.conversations.post_message(ADMIN, conversation.id, TWO_GATED)
    assert await container.worker.run_once()
    async with container.uow() as uow:
        first, second = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
    ids = [first.tool_call_id, second.tool_call_id]
    postgres = container.uow.engine.dialect.name == "postgresql"
    lease = LeaseAhead("worker:test", first.expires_at - timedelta(hours=1), 0)
    assert await _decide(container, first, lease, ids) == (False, False), "another call still awaits"
    assert await _decide(container, second, lease, ids) == (True, postgres)
    view = await container.runs.get_run(ADMIN, run.id)
    if postgres:  # leased by the decision's statement; SQLite re-queues it for a claim
        assert view.run.status is RunStatus.RUNNING and view.run.lease_owner == "worker:test"
    else:
        assert view.run.status is RunStatus.QUEUED
