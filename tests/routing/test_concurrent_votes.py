"""Ten approvers pressing at once, on SQLite and PostgreSQL (one connection each): exactly one
decision, each distinct approver counted once, the losers told `stale`."""

from __future__ import annotations

import asyncio

from sursis.domain.approvers import AlreadyVoted
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
