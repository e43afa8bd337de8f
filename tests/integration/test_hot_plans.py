"""The hot statements keep their indexes: with planner statistics from a few thousand rows of the
`make bench-volume` shape, no statement of the approval turn, the worker's claim, the sweeper, the
outbox scan or the operator's reads scans a big table sequentially (PostgreSQL; docs/scaling.md).

Every statement is the one the service sends (recorded while the real code runs), explained with
its own parameters, as PostgreSQL plans it for them.
"""

from __future__ import annotations

import re
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic_ai import Agent

from sursis import RunStatus, Service
from sursis.app.container import Container
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.clock import utcnow
from sursis.domain.records import AuditQuery, Principal
from sursis.domain.states import Decision, PendingStatus
from sursis.infra.db.engine import create_engine
from sursis.infra.db.repositories.audit import _unless_newest_guard
from tests.conftest import call, script

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import volume_fill  # noqa: E402
from volume_plans import Explained, StatementRecorder, explain  # noqa: E402

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
LARGE = volume_fill.LARGE_WORKSPACE
SHAPE = volume_fill.Shape(conversations=3000, outbox_delivered=2000, outbox_due=20)


async def fill(url: str) -> None:
    engine = create_engine(url)
    async with engine.begin() as conn:
        await volume_fill.fill(conn, SHAPE, lambda _: None)
        await conn.exec_driver_sql(volume_fill.MAKE_OVERDUE)
    async with engine.connect() as conn:
        await volume_fill.vacuum_analyze(await conn.execution_options(isolation_level="AUTOCOMMIT"))
    await engine.dispose()


async def explain_recorded(url: str, recorder: StatementRecorder) -> list[Explained]:
    engine = create_engine(url)
    try:
        return [await explain(engine, c.label, c.statement, c.parameters) for c in recorder.captured]
    finally:
        await engine.dispose()


def seq_scans(explained: list[Explained]) -> list[str]:
    return [f"{e.label}: Seq Scan on {table}\n{e.statement}" for e in explained for table in e.seq_scans]


async def test_no_hot_statement_scans_a_big_table(container: Container, database_url: str) -> None:
    await fill(database_url)
    recorder = StatementRecorder()
    content = (
        'go\nSCRIPT: [[{"tool": "replay_dlq_event", "args": {"event_id": "evt_1001", "reason": "t"}}], "ok"]'
    )
    with recorder.recording("turn"):
        conversation = await container.conversations.create_conversation(ADMIN, "ops", LARGE)
        run = await container.conversations.post_message(ADMIN, conversation.id, content)
        assert await container.worker.run_once()
        view = await container.runs.get_run(ADMIN, run.id)
        [pending] = view.pending
        assert await container.worker.run_once() is False
    with recorder.recording("resolve and resume"):
        await container.pending_calls.resolve_pending(
            ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
        )
        assert await container.worker.run_once()
    with recorder.recording("sweeper"):
        assert await container.worker.sweep() > 0
    now = utcnow()
    operator = Principal(id="operator:test", role=Role.OPERATOR, workspace=LARGE)
    with recorder.recording("operator reads"):
        page = await container.pending_calls.list_pending(
            operator, status=PendingStatus.AWAITING, kind=None, tool_name=None, after=None, limit=50
        )
        assert page.items
        assert all(item.workspace == LARGE for item in page.items)
    with recorder.recording("operator reads, deep page"):
        last = page.items[-1]
        await container.pending_calls.list_pending(
            operator,
            status=PendingStatus.AWAITING,
            kind=None,
            tool_name=None,
            after=(last.created_at, last.correlation_id),
            limit=50,
        )
    async with container.uow() as uow:
        with recorder.recording("operator reads"):
            await uow.audit.search(LARGE, AuditQuery(limit=100, newest_first=True))
            await uow.events.after(conversation.id, 0, 100)
        with recorder.recording("outbox due scan"):
            await uow.outbox.claim_due("webhook:", now, now + timedelta(seconds=30), 20)
    explained = await explain_recorded(database_url, recorder)
    labels = {e.label for e in explained}
    assert labels == {
        "turn",
        "resolve and resume",
        "sweeper",
        "operator reads",
        "operator reads, deep page",
    } | {"outbox due scan"}
    assert len(explained) > 20, [e.statement for e in explained]
    assert seq_scans(explained) == []
    # The queue, the sweeper and the outbox read their live rows through their partial indexes.
    plans = {label: "\n".join(e.text for e in explained if e.label == label) for label in labels}
    assert "ix_runs_live_status_updated_at" in plans["turn"]
    assert "ix_pending_calls_awaiting_expires_at" in plans["sweeper"]
    assert "ix_outbox_undelivered_id" in plans["outbox due scan"]
    # The deep page's cursor is one row comparison, which an index on (workspace, status,
    # created_at, correlation_id) can seek to (which index wins depends on the statistics: with
    # 150 awaiting calls in all, the awaiting calls' own partial index is as cheap).
    [deep] = [
        e for e in explained if e.label == "operator reads, deep page" and "pending_calls" in e.statement
    ]
    assert "ROW(created_at, correlation_id) < ROW(" in deep.text, deep.text
    # The operator's reads are the workspace's own (docs/scaling.md: a distributed table is sharded
    # by workspace, so each of these reads goes to one shard).
    for e in explained:
        reads_rows = "FROM pending_calls" in e.statement or "FROM audit_log" in e.statement
        if e.label.startswith("operator reads") and reads_rows:
            assert "workspace" in e.statement.split("WHERE", 1)[1], e.statement


TURN_ACTIONS = (
    "run.queued",
    "run.started",
    "pending.requested",
    "run.suspended",
    "pending.approved",
    "run.resumed",
    "tool.dispatched",
    "run.completed",
)
"""The audit rows of an approval turn of an adopted tool, in order."""


def adopted_agent() -> Agent[None, str]:
    """A user's agent whose gated tool the service cannot see act (not idempotent): its resume reads
    the call's newest mark before it runs it again (`call_marks.newest_mark`)."""
    agent: Agent[None, str] = Agent(name="payer", instructions="You pay.")

    @agent.tool_plain(requires_approval=True)
    def wire_money(amount: int) -> str:
        return f"wired {amount}"

    return agent


async def execute(url: str, sql: str, params: dict[str, Any], *, then_analyze: bool = False) -> None:
    """`sql` in a transaction of its own; then, with `then_analyze`, the audit log's statistics."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text(sql), params)
        if then_analyze:
            async with engine.connect() as conn:
                autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await autocommit.execute(sa.text("ANALYZE audit_log"))
    finally:
        await engine.dispose()


async def long_history(url: str, conversation_id: uuid.UUID) -> None:
    """The audit rows of 125 earlier turns of the conversation, each with a call (4 rows a turn,
    2 of them marks): the planner's statistics then count it among the log's most common
    conversations, and its marks among the common rows."""
    await execute(
        url,
        "INSERT INTO audit_log (at, actor, action, workspace, conversation_id, details) "
        "SELECT now() - interval '1 day', 'agent:payer', "
        "(ARRAY['run.started', 'pending.requested', 'tool.dispatched', 'run.completed'])[1 + g % 4], "
        ":workspace, :id, jsonb_build_object('tool_call_id', 'earlier_' || (g / 4)) "
        "FROM generate_series(0, 499) AS g",
        {"workspace": LARGE, "id": conversation_id},
    )


async def later_traffic(url: str) -> None:
    """What 5,000 approval turns of other conversations of the workspace write to the audit log
    while the call waits (8 rows a turn, as a turn writes them), then the planner's statistics."""
    actions = "', '".join(TURN_ACTIONS)
    await execute(
        url,
        "INSERT INTO audit_log (at, actor, action, workspace, conversation_id, details) "
        f"SELECT now(), 'agent:payer', (ARRAY['{actions}'])[1 + g % 8], :workspace, "
        "md5('conversation ' || (g / 8))::uuid, jsonb_build_object('tool_call_id', 'call_' || (g / 8)) "
        "FROM generate_series(0, 39999) AS g",
        {"workspace": LARGE},
        then_analyze=True,
    )


async def test_an_old_conversations_resume_reads_its_own_rows(database_url: str) -> None:
    """An approval often comes hours after its call, when the audit log has grown by many rows of
    other conversations. The resume's read of the call's newest mark goes through the
    conversation's own rows, newest first, not through every row written since (a backward scan
    of the whole log filtered down to one conversation)."""
    async with Service.open(
        database_url, agents=[adopted_agent()], model="scripted", run_worker=False
    ) as svc:
        conversation = await svc.start_conversation("payer", workspace=LARGE)
        await long_history(database_url, conversation.id)
        run = await svc.send(conversation.id, script([call("wire_money", amount=900)], "paid"))
        assert await svc.run_once()
        [pending] = (await svc.get_run(run.id)).pending
        await later_traffic(database_url)
        recorder = StatementRecorder()
        with recorder.recording("resume"):
            await svc.resolve(pending.correlation_id, "approve")
            assert await svc.run_once()
        assert (await svc.get_run(run.id)).run.status is RunStatus.COMPLETED
    [mark] = [c for c in recorder.captured if "FROM audit_log" in c.statement]
    engine = create_engine(database_url)
    try:
        for generic in (False, True):  # the first executions' plans, then the prepared statement's
            e = await explain(engine, "resume", mark.statement, mark.parameters, generic=generic)
            assert e.rows_removed is not None and e.rows_removed < 100, e.text
            assert "ix_audit_log_call_marks" in e.text or "ix_audit_log_conversation_id_id" in e.text, e.text
    finally:
        await engine.dispose()


async def test_a_new_calls_dispatch_guard_reads_no_earlier_calls_marks(database_url: str) -> None:
    """Before an at-most-once call runs, the statement that writes its dispatch mark asks whether
    the call's newest mark is a dispatch. A call with no mark of those actions yet, in a
    conversation with 1,000 earlier calls' marks, is answered by index lookups that read none of
    them (the partial indexes of migration 0039), in the plans made for its parameters and in the
    prepared statement's generic plan."""
    conversation = uuid.uuid4()
    await execute(
        database_url,
        "INSERT INTO audit_log (at, actor, action, workspace, conversation_id, details) "
        "SELECT now(), 'agent:payer', (ARRAY['tool.dispatched', 'pending.requested'])[1 + g % 2], "
        ":workspace, :id, jsonb_build_object('tool_call_id', 'earlier_' || (g / 2)) "
        "FROM generate_series(0, 1999) AS g",
        {"workspace": LARGE, "id": conversation},
        then_analyze=True,
    )
    sql, _ = _unless_newest_guard(2)
    params = {
        "g_conversation_id": conversation,
        "g_workspace": LARGE,
        "g_naming": "a_new_call",
        "g_unless": "tool.dispatched",
        "g_among_0": "tool.dispatched",
        "g_among_1": "pending.requested",
    }
    names = list(dict.fromkeys(re.findall(r":(g_\w+)", sql)))
    positional = re.sub(r":(g_\w+)", lambda m: f"${names.index(m.group(1)) + 1}", sql)
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            [[holds]] = (await conn.execute(sa.text(sql), params)).all()
        assert holds == 1, "no mark names the call: the guard holds"
        for generic in (False, True):
            e = await explain(
                engine, "dispatch guard", positional, [params[n] for n in names], generic=generic
            )
            assert e.rows_removed is not None and e.rows_removed < 10, e.text
            assert "ix_audit_log_call_marks" in e.text and "ix_audit_log_sealed_rows" in e.text, e.text
    finally:
        await engine.dispose()
