"""The use cases' decisions on an in-memory unit of work: races, cancels, expiry, edited arguments,
pages. No database and no HTTP; each test runs in milliseconds. The HTTP tests cover the wiring."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import (
    EXPIRY_ACTOR,
    PendingCallService,
    Resolution,
    expire_overdue_call,
)
from sursis.domain.audit.audit import AuditService
from sursis.domain.conversations.conversations import ConversationService
from sursis.domain.errors import ArgsChanged, Forbidden, NotFound, RunActive, Stale, ValidationFailed
from sursis.domain.records import AuditQuery, PendingCall, Principal, Run, ToolCallMetadata, Usage
from sursis.domain.runs import run_lifecycle
from sursis.domain.runs.runs import RunService
from sursis.domain.sanitize import args_hash
from sursis.domain.states import Decision, PendingStatus, RunStatus
from sursis.domain.tools import Category, Executor, PendingKind, ToolApprovalRequest, ToolSpec
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool, DeclaredToolCatalog
from sursis.infra.notifier import _CHANGES_KEPT, LocalRunNotifier
from tests.unit.fakes import FakeStore

USER = Principal(id="user-1", role=Role.USER, workspace="acme")
ALICE = Principal(id="op-alice", role=Role.OPERATOR, workspace="acme")
BOB = Principal(id="op-bob", role=Role.OPERATOR, workspace="acme")
OUTSIDER = Principal(id="op-eve", role=Role.OPERATOR, workspace="other")
ADMIN = Principal(id="admin", role=Role.ADMIN, workspace=None)
WORKER = "system:worker"
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


async def transfer(amount: int, to: str) -> str:
    return f"sent {amount} to {to}"


async def ask(question: str) -> int:
    raise AssertionError("answered by a person")


TRANSFER = ToolSpec("transfer", category=Category.MUTATE, effect="Send {amount} to {to}")
ASK = ToolSpec("ask", executor=Executor.HUMAN)
CATALOG = DeclaredToolCatalog(
    [
        AgentDefinition(
            "bank", "banking", (DeclaredTool.declare(transfer, TRANSFER), DeclaredTool.declare(ask, ASK))
        )
    ]
)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Notifications:
    queued: list[uuid.UUID] = field(default_factory=list)
    changed: list[uuid.UUID] = field(default_factory=list)

    async def run_queued(self, run_id: uuid.UUID) -> None:
        self.queued.append(run_id)

    async def run_changed(self, run_id: uuid.UUID) -> None:
        self.changed.append(run_id)


@dataclass
class Metrics:
    resolved: list[PendingStatus] = field(default_factory=list)
    runs: list[RunStatus] = field(default_factory=list)

    def run_status(self, status: RunStatus) -> None:
        self.runs.append(status)

    def pending_resolved(self, call: PendingCall, status: PendingStatus, at: datetime) -> None:
        self.resolved.append(status)

    def tool_call(self, metadata: ToolCallMetadata) -> None:
        return None


class Watcher:
    """Never wakes a long-poll: the tests here do not wait."""

    def watch(self, run_id: uuid.UUID) -> AbstractContextManager[asyncio.Event]:
        return nullcontext(asyncio.Event())

    def mark(self) -> int:
        return 0

    def changed_since(self, run_id: uuid.UUID, mark: int) -> bool:
        return True


@dataclass
class World:
    store: FakeStore = field(default_factory=FakeStore)
    clock: Clock = field(default_factory=Clock)
    notifier: Notifications = field(default_factory=Notifications)
    metrics: Metrics = field(default_factory=Metrics)

    @property
    def conversations(self) -> ConversationService:
        return ConversationService(self.store, CATALOG, self.notifier, clock=self.clock, metrics=self.metrics)

    @property
    def runs(self) -> RunService:
        return RunService(self.store, self.notifier, Watcher(), clock=self.clock, metrics=self.metrics)

    @property
    def pending(self) -> PendingCallService:
        return PendingCallService(self.store, CATALOG, self.notifier, clock=self.clock, metrics=self.metrics)

    @property
    def audit(self) -> AuditService:
        return AuditService(self.store)

    async def suspended(self, *calls: tuple[str, dict[str, Any]], expires_in: float = 60) -> Run:
        """A user's message whose run a worker suspended on `calls` (tool name, arguments)."""
        conversation = await self.conversations.create_conversation(USER, "bank", None)
        await self.conversations.post_message(USER, conversation.id, "pay the invoices")
        now = self.clock()
        async with self.store() as uow:
            run = await uow.runs.claim_next(WORKER, now, now + timedelta(seconds=30))
            assert run is not None
            pending = [self._call(run, name, args, now, expires_in) for name, args in calls]
            assert await run_lifecycle.suspend(uow, run, WORKER, pending, Usage(), now, actor=WORKER)
            await uow.commit()
        return run

    def _call(
        self, run: Run, name: str, args: dict[str, Any], now: datetime, expires_in: float
    ) -> PendingCall:
        spec = CATALOG.spec("bank", name)
        request = ToolApprovalRequest.for_call(spec, name, "bank", args)
        return PendingCall(
            correlation_id=request.correlation_id,
            conversation_id=run.conversation_id,
            run_id=run.id,
            workspace=run.workspace,
            segment=run.segment,
            tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
            tool_name=name,
            agent="bank",
            executor=spec.executor if spec else Executor.SERVER,
            kind=PendingKind.ELICITATION if name == "ask" else PendingKind.APPROVAL,
            args=args,
            args_summary=request.args_summary,
            args_hash=args_hash(name, args),
            effect_description=request.effect_description,
            status=PendingStatus.AWAITING,
            created_at=now,
            expires_at=now + timedelta(seconds=expires_in),
            requested_by=run.started_by,  # as the runner records it: the key that posted the message
        )

    async def awaiting(self, run: Run) -> list[PendingCall]:
        return (await self.runs.get_run(ALICE, run.id)).pending

    async def actions(self, run: Run) -> list[tuple[str, str]]:
        page = await self.audit.list_audit(ADMIN, AuditQuery(conversation_id=run.conversation_id, limit=100))
        return [(row.action, row.actor) for row in page.items]


@pytest.fixture
def world() -> World:
    return World()


async def test_of_two_racing_resolvers_one_wins_and_the_other_learns_who(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
    [call] = await world.awaiting(run)

    outcomes = await asyncio.gather(
        world.pending.resolve_pending(ALICE, call.correlation_id, Resolution(Decision.APPROVE)),
        world.pending.resolve_pending(BOB, call.correlation_id, Resolution(Decision.DENY, reason="no")),
        return_exceptions=True,
    )

    [won] = [o for o in outcomes if isinstance(o, PendingCall)]
    [lost] = [o for o in outcomes if isinstance(o, Stale)]
    assert won.status is PendingStatus.APPROVED and won.resolved_by == ALICE.id
    assert lost.extra["pending_status"] == "approved"
    assert lost.extra["resolved_by"] == ALICE.id
    assert (await world.pending.get_pending(ALICE, call.correlation_id)).status is PendingStatus.APPROVED
    assert (await world.runs.get_run(ALICE, run.id)).run.status is RunStatus.QUEUED
    assert world.notifier.queued.count(run.id) == 2  # the message, then the one re-queue
    decided = [a for a in await world.actions(run) if a[0] in ("pending.approved", "pending.denied")]
    assert decided == [("pending.approved", ALICE.id)]
    assert world.metrics.resolved == [PendingStatus.APPROVED]


async def test_a_run_is_requeued_by_the_last_of_its_calls_only(world: World) -> None:
    run = await world.suspended(
        ("transfer", {"amount": 1, "to": "a"}), ("transfer", {"amount": 2, "to": "b"})
    )
    first, second = await world.awaiting(run)

    decided = await world.pending.decide_pending(ALICE, first.correlation_id, Resolution(Decision.APPROVE))
    assert not decided.run_queued
    assert (await world.runs.get_run(ALICE, run.id)).run.status is RunStatus.SUSPENDED
    assert run.id not in world.notifier.queued[1:]

    decided = await world.pending.decide_pending(BOB, second.correlation_id, Resolution(Decision.DENY))
    assert decided.run_queued and decided.call.status is PendingStatus.DENIED
    view = await world.runs.get_run(ALICE, run.id)
    assert view.run.status is RunStatus.QUEUED and view.run.awaiting_count == 0
    assert world.metrics.runs[-1] is RunStatus.QUEUED


async def test_cancelling_a_suspended_run_cancels_its_calls_and_frees_the_conversation(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}), ("ask", {"question": "how much?"}))
    calls = await world.awaiting(run)

    view = await world.runs.cancel_run(USER, run.id)

    assert view.run.status is RunStatus.CANCELLED and view.pending == []
    for call in calls:
        assert (await world.pending.get_pending(ALICE, call.correlation_id)).status is PendingStatus.CANCELLED
    with pytest.raises(Stale) as late:
        await world.pending.resolve_pending(ALICE, calls[0].correlation_id, Resolution(Decision.APPROVE))
    assert late.value.extra["pending_status"] == "cancelled"
    assert late.value.extra["resolved_by"] == USER.id
    assert (await world.conversations.get_conversation(USER, run.conversation_id)).active_run_id is None
    assert ("run.cancelled", USER.id) in await world.actions(run)
    assert world.metrics.resolved == [PendingStatus.CANCELLED, PendingStatus.CANCELLED]
    assert world.notifier.changed == [run.id]
    follow_up = await world.conversations.post_message(USER, run.conversation_id, "start over")
    assert follow_up.status is RunStatus.QUEUED


async def test_a_finished_run_cannot_be_cancelled_again(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
    await world.runs.cancel_run(USER, run.id)
    with pytest.raises(Stale) as again:
        await world.runs.cancel_run(USER, run.id)
    assert again.value.extra == {"run_status": "cancelled"}


async def test_cancelling_a_running_run_asks_its_worker_to_stop(world: World) -> None:
    conversation = await world.conversations.create_conversation(USER, "bank", None)
    await world.conversations.post_message(USER, conversation.id, "hello")
    async with world.store() as uow:
        run = await uow.runs.claim_next(WORKER, START, START + timedelta(seconds=30))
        await uow.commit()
    assert run is not None

    view = await world.runs.cancel_run(USER, run.id)

    assert view.run.status is RunStatus.RUNNING and view.run.cancel_requested
    assert world.metrics.runs == [RunStatus.QUEUED]  # the message; the worker ends the run
    assert ("run.cancel_requested", USER.id) in await world.actions(run)


async def test_a_decision_after_expiry_expires_the_call_and_is_stale(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}), expires_in=60)
    [call] = await world.awaiting(run)
    world.clock.advance(61)

    with pytest.raises(Stale) as late:
        await world.pending.resolve_pending(ALICE, call.correlation_id, Resolution(Decision.APPROVE))

    assert late.value.extra["pending_status"] == "expired"
    assert late.value.extra["resolved_by"] == EXPIRY_ACTOR
    expired = await world.pending.get_pending(ALICE, call.correlation_id)
    assert expired.status is PendingStatus.EXPIRED and expired.resolved_by == EXPIRY_ACTOR
    assert (await world.runs.get_run(ALICE, run.id)).run.status is RunStatus.QUEUED
    assert ("pending.expired", EXPIRY_ACTOR) in await world.actions(run)
    assert ("pending.approved", ALICE.id) not in await world.actions(run)
    with pytest.raises(Stale) as again:
        await world.pending.resolve_pending(BOB, call.correlation_id, Resolution(Decision.DENY))
    assert again.value.extra["pending_status"] == "expired"


async def test_the_sweeper_expires_an_overdue_call_once(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}), expires_in=5)
    [call] = await world.awaiting(run)
    world.clock.advance(6)
    async with world.store() as uow:
        [overdue] = await uow.pending.overdue(world.clock(), 10)
        expiry = await expire_overdue_call(uow, overdue, world.clock())
        again = await expire_overdue_call(uow, overdue, world.clock())
        await uow.commit()
    assert expiry is not None and expiry.run_requeued
    assert again is None
    assert (await world.pending.get_pending(ALICE, call.correlation_id)).status is PendingStatus.EXPIRED


async def test_a_decision_on_arguments_that_changed_since_review_is_refused(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
    [call] = await world.awaiting(run)
    reviewed = args_hash("transfer", {"amount": 1, "to": "bob"})

    with pytest.raises(ArgsChanged) as refused:
        await world.pending.resolve_pending(
            ALICE, call.correlation_id, Resolution(Decision.APPROVE, args_hash=reviewed)
        )

    assert refused.value.extra == {"args_hash": call.args_hash}
    assert (await world.pending.get_pending(ALICE, call.correlation_id)).status is PendingStatus.AWAITING
    approved = await world.pending.resolve_pending(
        ALICE, call.correlation_id, Resolution(Decision.APPROVE, args_hash=call.args_hash)
    )
    assert approved.status is PendingStatus.APPROVED


async def test_edited_arguments_are_validated_and_recorded(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
    [call] = await world.awaiting(run)

    with pytest.raises(ValidationFailed):
        await world.pending.resolve_pending(
            ALICE, call.correlation_id, Resolution(Decision.APPROVE, args={"amount": "lots", "to": "bob"})
        )
    assert (await world.pending.get_pending(ALICE, call.correlation_id)).status is PendingStatus.AWAITING

    edited = {"amount": 5, "to": "bob"}
    approved = await world.pending.resolve_pending(
        ALICE, call.correlation_id, Resolution(Decision.APPROVE, args=edited)
    )

    assert approved.resolution == {"decision": "approve", "args": edited}
    page = await world.audit.list_audit(ADMIN, AuditQuery(correlation_id=call.correlation_id))
    [row] = [r for r in page.items if r.action == "pending.approved"]
    assert row.details["edited_args"] == edited
    assert row.details["args_hash"] == args_hash("transfer", edited)


async def test_unchanged_arguments_are_not_recorded_as_an_edit(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
    [call] = await world.awaiting(run)
    approved = await world.pending.resolve_pending(
        ALICE, call.correlation_id, Resolution(Decision.APPROVE, args={"amount": 10, "to": "bob"})
    )
    assert approved.resolution == {"decision": "approve"}


async def test_an_answer_is_checked_against_the_tools_result_type(world: World) -> None:
    run = await world.suspended(("ask", {"question": "how much?"}))
    [call] = await world.awaiting(run)
    with pytest.raises(ValidationFailed):
        await world.pending.resolve_pending(
            USER, call.correlation_id, Resolution(Decision.ANSWER, result="many")
        )
    answered = await world.pending.resolve_pending(
        USER, call.correlation_id, Resolution(Decision.ANSWER, result=3)
    )
    assert answered.status is PendingStatus.ANSWERED and answered.resolution == {
        "decision": "answer",
        "result": 3,
    }


async def test_only_operators_approve_and_other_workspaces_see_nothing(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
    [call] = await world.awaiting(run)
    with pytest.raises(Forbidden):
        await world.pending.resolve_pending(USER, call.correlation_id, Resolution(Decision.APPROVE))
    with pytest.raises(NotFound):
        await world.pending.resolve_pending(OUTSIDER, call.correlation_id, Resolution(Decision.APPROVE))
    with pytest.raises(NotFound):
        await world.runs.get_run(OUTSIDER, run.id)
    assert (await world.pending.get_pending(ALICE, call.correlation_id)).status is PendingStatus.AWAITING


async def test_a_second_message_while_a_run_waits_names_the_run_and_its_calls(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
    with pytest.raises(RunActive) as refused:
        await world.conversations.post_message(USER, run.conversation_id, "and another")
    assert refused.value.extra["run_id"] == str(run.id)
    [brief] = refused.value.extra["pending"]
    assert brief["tool_name"] == "transfer" and "args" not in brief


async def test_pages_end_where_the_rows_do(world: World) -> None:
    for _ in range(3):
        run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
        world.clock.advance(1)
        await world.runs.cancel_run(USER, run.id)
    seen: list[uuid.UUID] = []
    after = None
    while True:
        page = await world.pending.list_pending(
            ALICE, status=None, kind=None, tool_name=None, after=after, limit=2
        )
        seen += [c.correlation_id for c in page.items]
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert len(seen) == len(set(seen)) == 3
    assert len(page.items) == 1

    rows = await world.audit.list_audit(ADMIN, AuditQuery(limit=4, newest_first=True))
    assert len(rows.items) == 4 and rows.next_cursor == rows.items[-1].id
    everything = await world.audit.list_audit(ADMIN, AuditQuery(limit=1000))
    assert everything.next_cursor is None
    assert (await world.audit.list_audit(Principal("op-none", Role.OPERATOR, None), AuditQuery())).items == []


async def test_a_refused_decision_commits_nothing(world: World) -> None:
    run = await world.suspended(("transfer", {"amount": 10, "to": "bob"}))
    [call] = await world.awaiting(run)
    commits = world.store.commits
    with pytest.raises(ValidationFailed):
        await world.pending.resolve_pending(
            ALICE, call.correlation_id, Resolution(Decision.APPROVE, args={"amount": "x", "to": "bob"})
        )
    assert world.store.commits == commits
    assert world.metrics.resolved == []


class CountedRuns(RunService):
    """The world's runs, watched by a real notifier, counting the reads of a run."""

    reads = 0

    async def get_run(self, principal: Principal, run_id: uuid.UUID) -> Any:
        self.reads += 1
        return await super().get_run(principal, run_id)


async def _suspend_queued(world: World, run: Run) -> None:
    """What a worker does to a queued run: claims it and suspends it on one call."""
    now = world.clock()
    async with world.store() as uow:
        claimed = await uow.runs.claim_next(WORKER, now, now + timedelta(seconds=30))
        assert claimed is not None and claimed.id == run.id
        call = world._call(claimed, "transfer", {"amount": 1, "to": "a"}, now, 60)
        assert await run_lifecycle.suspend(uow, claimed, WORKER, [call], Usage(), now, actor=WORKER)
        await uow.commit()


async def _queued_after_a_mark(world: World) -> tuple[LocalRunNotifier, CountedRuns, int, Run]:
    """A message's run queued after a mark of a real notifier, whose runs count their reads."""
    notifier = LocalRunNotifier()
    runs = CountedRuns(world.store, notifier, notifier, clock=world.clock)
    conversation = await world.conversations.create_conversation(USER, "bank", None)
    since = runs.mark()
    run = await world.conversations.post_message(USER, conversation.id, "pay")
    return notifier, runs, since, run


async def test_a_wait_after_queueing_reads_the_run_once_a_change_is_heard(world: World) -> None:
    notifier, runs, since, run = await _queued_after_a_mark(world)
    await notifier.run_queued(run.id)  # this process queueing it is no change that settles it

    waiting = asyncio.create_task(runs.wait_after_queueing(USER, run, 10, queued_since=since))
    await asyncio.sleep(0.05)
    assert runs.reads == 0, "nothing was heard of the run since it was queued: no read"
    await _suspend_queued(world, run)
    await notifier.run_changed(run.id)

    view = await asyncio.wait_for(waiting, 5)
    assert view.run.status is RunStatus.SUSPENDED
    assert runs.reads == 1


async def test_a_run_that_changed_before_the_wait_began_is_read_at_once(world: World) -> None:
    notifier, runs, since, run = await _queued_after_a_mark(world)
    await _suspend_queued(world, run)
    await notifier.run_changed(run.id)  # heard before the wait registered its watch

    view = await asyncio.wait_for(runs.wait_after_queueing(USER, run, 30, queued_since=since), 5)
    assert view.run.status is RunStatus.SUSPENDED
    assert runs.reads == 1


async def test_a_wait_that_hears_nothing_reads_the_run_at_its_deadline(world: World) -> None:
    _, runs, since, run = await _queued_after_a_mark(world)

    view = await runs.wait_after_queueing(USER, run, 0.2, queued_since=since)
    assert view.run.status is RunStatus.QUEUED
    assert runs.reads == 1


def test_changes_heard_of_other_runs_or_forgotten_count_as_they_should() -> None:
    notifier = LocalRunNotifier()
    mine, other = uuid.uuid4(), uuid.uuid4()
    since = notifier.mark()
    notifier.note_change(other)
    assert not notifier.changed_since(mine, since)
    assert notifier.changed_since(other, since)
    for _ in range(_CHANGES_KEPT):  # more runs changed than are remembered: `mine` may be among them
        notifier.note_change(uuid.uuid4())
    assert notifier.changed_since(mine, since)
    later = notifier.mark()
    assert not notifier.changed_since(mine, later)
    notifier.note_changes_unknown()  # a wake-up that names no run (SQLite's file watch, a LISTEN reconnect)
    assert notifier.changed_since(mine, later)
