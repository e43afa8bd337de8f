"""Delegation and reassignment, on SQLite and PostgreSQL: a delegate's vote counts for the approver
it acts for and reads "for X by Y"; an admin puts a waiting call before another key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sursis.domain.approvers import AlreadyVoted, NotAnApprover, SelfApproval
from sursis.domain.clock import utcnow
from sursis.domain.errors import NotFound, ValidationFailed
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.states import PendingStatus
from tests.routing.kit import ADMIN, routing_service

TWO = ApprovalRoute(groups=("finance",), quorum=2)
ONE = ApprovalRoute(groups=("finance",))


async def test_a_delegate_votes_for_its_approver_and_it_reads_for_x_by_y(database_url: str) -> None:
    async with routing_service(database_url, {"D1": TWO, "D2": ONE}) as people:
        for name in ("ann", "bob", "dee", "rex"):
            await people.key(name)
        await people.group("finance", "ann", "bob")
        approvers = people.svc.container.approvers
        delegation = await approvers.delegate(
            people["ann"], delegate=people["dee"].id, ends_at=utcnow() + timedelta(hours=1)
        )
        call = await people.ask("rex", "D1")
        counted = await people.vote("dee", call)
        assert counted.approval is not None
        [vote] = counted.approval.votes
        assert (vote.voter, vote.cast_by, vote.on_behalf_of) == (
            people["ann"].id,
            people["dee"].id,
            people["ann"].id,
        )
        with pytest.raises(AlreadyVoted):
            await people.vote("ann", call)  # dee already voted for ann

        decided = await people.vote("bob", call)
        assert decided.status is PendingStatus.APPROVED
        rows = [r for r in await people.audit(call) if r.action == "pending.vote"]
        assert rows[0].actor == people["dee"].id and rows[0].details["on_behalf_of"] == people["ann"].id

        # The delegate deciding alone (quorum 1): resolved by it, for the approver.
        other = await people.ask("rex", "D2")
        decided = await people.vote("dee", other)
        assert decided.resolved_by == people["dee"].id
        assert decided.resolution is not None and decided.resolution["on_behalf_of"] == people["ann"].id

        # Revoked: the delegate is nobody's approver any more.
        await approvers.revoke_delegation(people["ann"], delegation.id)
        third = await people.ask("rex", "D2")
        with pytest.raises(NotAnApprover):
            await people.vote("dee", third)


async def test_the_requester_cannot_vote_through_a_delegation(database_url: str) -> None:
    async with routing_service(database_url, {"D3": ONE}) as people:
        for name in ("ann", "rex"):
            await people.key(name)
        await people.group("finance", "ann", "rex")
        await people.svc.container.approvers.delegate(
            people["ann"], delegate=people["rex"].id, ends_at=utcnow() + timedelta(hours=1)
        )
        call = await people.ask("rex", "D3")
        with pytest.raises(SelfApproval):
            await people.vote("rex", call)


async def test_delegations_are_checked(database_url: str) -> None:
    async with routing_service(database_url, {}) as people:
        for name in ("ann", "dee"):
            await people.key(name)
        user = await people.key("usr", role="user")  # type: ignore[arg-type]
        approvers = people.svc.container.approvers
        later = utcnow() + timedelta(hours=1)
        with pytest.raises(ValidationFailed):
            await approvers.delegate(people["ann"], delegate=people["ann"].id, ends_at=later)
        with pytest.raises(ValidationFailed):
            await approvers.delegate(
                people["ann"], delegate=people["dee"].id, ends_at=utcnow() - timedelta(hours=1)
            )
        with pytest.raises(ValidationFailed):
            await approvers.delegate(
                people["ann"], delegate=people["dee"].id, ends_at=utcnow() + timedelta(days=91)
            )
        with pytest.raises(ValidationFailed):
            await approvers.delegate(people["ann"], delegate=user.id, ends_at=later)
        given = await approvers.delegate(people["ann"], delegate=people["dee"].id, ends_at=later)
        with pytest.raises(NotFound):
            await approvers.revoke_delegation(people["dee"], given.id)  # only its delegator or an admin
        assert [d.id for d in await approvers.list_delegations(people["dee"])] == [given.id]


async def test_an_admin_reassigns_a_waiting_call_to_a_key(database_url: str) -> None:
    async with routing_service(database_url, {"R1": ONE}) as people:
        for name in ("ann", "kim", "rex"):
            await people.key(name)
        await people.group("finance", "ann")
        call = await people.ask("rex", "R1")
        with pytest.raises(NotAnApprover):
            await people.vote("kim", call)
        moved = await people.svc.container.approvers.reassign(
            ADMIN, call.correlation_id, [f"key:{people['kim'].id}"]
        )
        assert moved.approval is not None and moved.approval.approvers == (f"key:{people['kim'].id}",)
        with pytest.raises(NotAnApprover):
            await people.vote("ann", call)  # finance no longer decides it
        assert (await people.vote("kim", call)).status is PendingStatus.APPROVED
        assert "pending.reassigned" in [r.action for r in await people.audit(call)]
