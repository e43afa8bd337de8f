"""Reminders, escalation and timeouts in the sweeper, on SQLite and PostgreSQL: after a 2 s SLA the
next group may approve, and a call nobody decides reaches the model as a timeout, not a denial."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from sursis.domain.approvers import NotAnApprover
from sursis.domain.errors import Stale
from sursis.domain.policy_decisions import ApprovalRoute, Escalation, TimeoutOutcome
from sursis.domain.states import PendingStatus
from tests.routing.kit import routing_service

SLA = timedelta(seconds=2)
ESCALATES = ApprovalRoute(
    groups=("finance",),
    remind_after=timedelta(seconds=1),
    escalations=(Escalation(after=SLA, to=("group:on-call",)),),
    timeout=timedelta(minutes=5),
)
TIMES_OUT = ApprovalRoute(groups=("finance",), timeout=SLA, on_timeout=TimeoutOutcome.DENY)
EXPIRES = ApprovalRoute(groups=("finance",), timeout=SLA, on_timeout=TimeoutOutcome.EXPIRE)


async def test_after_the_sla_the_next_group_may_approve(database_url: str) -> None:
    async with routing_service(database_url, {"E1": ESCALATES}) as people:
        for name in ("ann", "pat", "rex"):
            await people.key(name)
        await people.group("finance", "ann")
        await people.group("on-call", "pat")
        call = await people.ask("rex", "E1")
        assert call.expires_at - call.created_at == timedelta(minutes=5)  # the route's timeout

        with pytest.raises(NotAnApprover):
            await people.vote("pat", call)
        await asyncio.sleep(SLA.total_seconds() + 0.2)
        await people.svc.sweep()

        shown = await people.show("pat", call)
        assert shown.approval is not None
        assert shown.approval.escalation_level == 1
        assert shown.approval.approvers == ("group:finance", "group:on-call")
        assert shown.approval.can_decide is True
        actions = [r.action for r in await people.audit(call)]
        assert actions.count("pending.reminded") == 1 and actions.count("pending.escalated") == 1
        events = [e.type async for e in people.svc.events(call.conversation_id, follow=False)]
        assert events.count("pending.reminded") == 1 and events.count("pending.escalated") == 1

        await people.svc.sweep()  # nothing more is due: no second reminder or escalation
        assert [r.action for r in await people.audit(call)].count("pending.escalated") == 1

        approved = await people.vote("pat", call)
        assert approved.status is PendingStatus.APPROVED
        assert "refunded 900 for E1" in await people.output(call)


async def test_a_timeout_reaches_the_model_as_nobody_decided(database_url: str) -> None:
    async with routing_service(database_url, {"T1": TIMES_OUT, "T2": EXPIRES}) as people:
        for name in ("ann", "rex"):
            await people.key(name)
        await people.group("finance", "ann")
        denied_call = await people.ask("rex", "T1")
        expired_call = await people.ask("rex", "T2")
        await asyncio.sleep(SLA.total_seconds() + 0.2)
        await people.svc.run_until_idle()

        [denied] = await people.svc.pending(conversation_id=denied_call.conversation_id, status=None)
        assert denied.status is PendingStatus.DENIED
        assert denied.resolved_by == "system:sweeper"
        output = await people.output(denied_call)
        assert "APPROVAL_TIMED_OUT" in output and "Nobody decided within 2 s" in output
        assert "APPROVAL_DENIED" not in output
        assert "pending.timed_out" in [r.action for r in await people.audit(denied_call)]

        [expired] = await people.svc.pending(conversation_id=expired_call.conversation_id, status=None)
        assert expired.status is PendingStatus.EXPIRED
        assert "APPROVAL_EXPIRED" in await people.output(expired_call)


UNREACHABLE = ApprovalRoute(
    groups=("finance",),
    escalations=(Escalation(after=timedelta(seconds=1), to=("slack:C0NOWHERE", "email:ops@example.com")),),
)


async def test_a_slack_channel_the_workspace_cannot_reach_is_named_in_the_audit(database_url: str) -> None:
    async with routing_service(database_url, {"U1": UNREACHABLE}) as people:
        for name in ("ann", "rex"):
            await people.key(name)
        await people.group("finance", "ann")
        call = await people.ask("rex", "U1")
        await asyncio.sleep(1.2)
        await people.svc.sweep()
        [escalated] = [r for r in await people.audit(call) if r.action == "pending.escalated"]
        assert escalated.details["unreachable"] == ["slack:C0NOWHERE"]  # no Slack binding: no team
        assert escalated.details["to"] == ["slack:C0NOWHERE", "email:ops@example.com"]
        async with people.svc.container.uow.reader() as uow:
            bindings = await uow.channels.list_bindings("default", call.conversation_id)
        assert [b.email for b in bindings] == ["ops@example.com"]


async def test_a_vote_after_the_timeout_finds_the_call_denied_by_its_route(database_url: str) -> None:
    async with routing_service(database_url, {"T3": TIMES_OUT}) as people:
        for name in ("ann", "rex"):
            await people.key(name)
        await people.group("finance", "ann")
        call = await people.ask("rex", "T3")
        await asyncio.sleep(SLA.total_seconds() + 0.2)
        with pytest.raises(Stale) as late:  # before any sweeper pass
            await people.vote("ann", call)
        assert late.value.extra["pending_status"] == "denied"
        assert "denied by its route" in late.value.message
        async with people.svc.container.uow.reader() as uow:
            votes = await uow.approvers.votes([call.correlation_id])
        assert votes == {}  # the late vote is not kept
        assert "APPROVAL_TIMED_OUT" in await people.output(call)
