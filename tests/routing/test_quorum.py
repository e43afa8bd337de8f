"""Votes on a call routed to an approver group, on SQLite and PostgreSQL: a quorum of distinct
approvers approves, the requester and outsiders are refused, one denial decides, a vote is cast once."""

from __future__ import annotations

import pytest

from sursis.domain.approvers import AlreadyVoted, NotAnApprover, SelfApproval
from sursis.domain.errors import InvalidDecision
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.states import PendingStatus
from tests.routing.kit import routing_service

FINANCE_2_OF_3 = ApprovalRoute(groups=("finance",), quorum=2)


async def test_two_of_three_approve_and_the_requester_and_an_outsider_are_refused(database_url: str) -> None:
    async with routing_service(database_url, {"A1": FINANCE_2_OF_3}) as people:
        for name in ("ann", "bob", "cid", "rex", "out"):
            await people.key(name)
        await people.group("finance", "ann", "bob", "cid", "rex")
        call = await people.ask("rex", "A1")

        first = await people.vote("ann", call)
        assert first.status is PendingStatus.AWAITING
        assert first.approval is not None
        assert (first.approval.quorum, first.approval.approvals, first.approval.still_needed) == (2, 1, 1)
        assert [(v.voter, v.decision) for v in first.approval.votes] == [(people["ann"].id, "approve")]

        with pytest.raises(AlreadyVoted):
            await people.vote("ann", call)
        with pytest.raises(SelfApproval):
            await people.vote("rex", call)  # a member of finance, but it asked
        with pytest.raises(NotAnApprover):
            await people.vote("out", call)

        shown = await people.show("cid", call)
        assert shown.approval is not None and shown.approval.can_decide is True
        assert (await people.show("ann", call)).approval.can_decide is False  # type: ignore[union-attr]
        assert (await people.show("rex", call)).approval.can_decide is False  # type: ignore[union-attr]

        second = await people.vote("bob", call)
        assert second.status is PendingStatus.APPROVED
        assert second.approval is not None and second.approval.still_needed == 0
        assert "refunded 900 for A1" in await people.output(call)

        rows = await people.audit(call)
        assert [(r.action, r.actor) for r in rows if r.action != "pending.requested"] == [
            ("pending.vote", people["ann"].id),
            ("pending.vote", people["bob"].id),
            ("pending.approved", people["bob"].id),
        ]
        votes = [r for r in rows if r.action == "pending.vote"]
        assert [r.details["approvals"] for r in votes] == [1, 2]
        assert [r.action for r in rows].count("pending.approved") == 1


async def test_one_denial_decides(database_url: str) -> None:
    async with routing_service(database_url, {"A2": FINANCE_2_OF_3}) as people:
        for name in ("ann", "bob", "rex"):
            await people.key(name)
        await people.group("finance", "ann", "bob")
        call = await people.ask("rex", "A2")
        await people.vote("ann", call)
        denied = await people.vote("bob", call, "deny", reason="not this month")
        assert denied.status is PendingStatus.DENIED
        output = await people.output(call)
        assert "APPROVAL_DENIED" in output and "not this month" in output


async def test_a_call_without_groups_is_decided_by_any_operator_in_one_click(database_url: str) -> None:
    async with routing_service(database_url, {"A3": ApprovalRoute()}) as people:
        for name in ("ann", "rex"):
            await people.key(name)
        call = await people.ask("rex", "A3")
        assert call.approval is None
        decided = await people.vote("ann", call)
        assert decided.status is PendingStatus.APPROVED


async def test_edited_arguments_need_a_quorum_of_one(database_url: str) -> None:
    async with routing_service(database_url, {"A4": FINANCE_2_OF_3}) as people:
        for name in ("ann", "rex"):
            await people.key(name)
        await people.group("finance", "ann")
        call = await people.ask("rex", "A4")
        with pytest.raises(InvalidDecision):
            await people.vote("ann", call, args={"order_id": "A4", "amount": 1})
        shown = await people.show("ann", call)
        assert shown.approval is not None and shown.approval.votes == ()  # nothing was counted
