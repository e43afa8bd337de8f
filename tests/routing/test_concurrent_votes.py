"""Ten approvers pressing at once, on SQLite and PostgreSQL (one connection each): exactly one
decision, each distinct approver counted once, the losers told `stale`; where decisions are sealed,
the deciding vote's seal covers every vote that made the quorum, so the approved call runs."""

from __future__ import annotations

import asyncio
import base64
import os

from sursis.domain.approvers import AlreadyVoted
from sursis.domain.audit.integrity import FINDING_ACTIONS
from sursis.domain.errors import Stale
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.records import PendingCall
from sursis.domain.states import PendingStatus
from tests.routing.kit import routing_service

QUORUM = 3


async def test_ten_concurrent_approvers_give_one_decision(database_url: str) -> None:
    async with routing_service(database_url, {"C1": ApprovalRoute(groups=("ops",), quorum=QUORUM)}) as people:
        names = [f"op{i}" for i in range(10)]
        for name in [*names, "rex"]:
            await people.key(name)
        await people.group("ops", *names)
        call = await people.ask("rex", "C1")

        # Each approver presses twice, all at once.
        presses = [people.vote(name, call) for name in names for _ in range(2)]
        outcomes = await asyncio.gather(*presses, return_exceptions=True)

        decided = [o for o in outcomes if isinstance(o, PendingCall) and o.status is PendingStatus.APPROVED]
        counted = [o for o in outcomes if isinstance(o, PendingCall) and o.status is PendingStatus.AWAITING]
        refused = [o for o in outcomes if isinstance(o, Stale | AlreadyVoted)]
        assert len(decided) == 1
        assert len(counted) == QUORUM - 1
        assert len(refused) == len(presses) - QUORUM
        assert not [
            o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, Stale | AlreadyVoted)
        ]

        async with people.svc.container.uow.reader() as uow:
            votes = (await uow.approvers.votes([call.correlation_id]))[call.correlation_id]
            run = await uow.runs.get(call.run_id)
        assert len(votes) == QUORUM and len({v.voter for v in votes}) == QUORUM
        actions = [r.action for r in await people.audit(call)]
        assert actions.count("pending.approved") == 1 and actions.count("pending.vote") == QUORUM
        assert run is not None and run.awaiting_count == 0
        assert "refunded 900 for C1" in await people.output(call)


async def test_votes_that_commit_while_the_deciding_vote_waits_are_sealed_with_it(database_url: str) -> None:
    """A vote read the call's earlier votes, then waited on the route's row while another approval
    committed: the decision it makes seals the votes counted under that row, not the ones it read
    first. Were one missing, the sealed votes would not meet the quorum and the approved call would
    be refused at its resume (`integrity.decision_unsealed`, run failed `decision_seal_invalid`)."""
    keys = f"k1:{base64.b64encode(os.urandom(32)).decode()}"
    route = {"C1": ApprovalRoute(groups=("ops",), quorum=QUORUM)}
    async with routing_service(database_url, route, encryption_keys=keys) as people:
        names = [f"op{i}" for i in range(6)]
        for name in [*names, "rex"]:
            await people.key(name)
        await people.group("ops", *names)
        for _ in range(3):
            call = await people.ask("rex", "C1")
            outcomes = await asyncio.gather(*(people.vote(n, call) for n in names), return_exceptions=True)
            decided = [
                o for o in outcomes if isinstance(o, PendingCall) and o.status is PendingStatus.APPROVED
            ]
            assert len(decided) == 1, outcomes
            [approved] = decided
            assert approved.resolution is not None
            assert len(approved.resolution["votes"]) == QUORUM
            assert "refunded 900 for C1" in await people.output(call)
            assert not [r for r in await people.audit(call) if r.action in FINDING_ACTIONS]
