"""The inbox cursor is a row comparison on (created_at, correlation_id): paging visits every call
once, in order, ties of `created_at` included, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

from sursis.app.container import Container
from sursis.domain.access import Role
from sursis.domain.records import Principal
from sursis.domain.states import PendingStatus

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
GATED = 'go\nSCRIPT: [[{"tool": "replay_dlq_event", "args": {"event_id": "evt_1001", "reason": "t"}}], "ok"]'


async def test_paging_visits_every_call_once_in_order_ties_included(container: Container) -> None:
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
    assert await container.worker.run_once()
    [call] = (await container.runs.get_run(ADMIN, run.id)).pending
    async with container.uow() as uow:
        for i in range(7):
            # Three instants, several calls at each: the cursor must break ties by id.
            at = call.created_at - timedelta(seconds=i % 3)
            await uow.pending.add(
                dataclasses.replace(call, correlation_id=uuid.uuid4(), tool_call_id=f"tie_{i}", created_at=at)
            )
        await uow.commit()
    async with container.uow.reader() as uow:
        everything = await uow.pending.search(
            workspace="default",
            status=PendingStatus.AWAITING,
            kind=None,
            tool_name=None,
            after=None,
            limit=100,
        )
        paged: list[uuid.UUID] = []
        after = None
        while True:
            page = await uow.pending.search(
                workspace="default",
                status=PendingStatus.AWAITING,
                kind=None,
                tool_name=None,
                after=after,
                limit=2,
            )
            if not page:
                break
            paged.extend(c.correlation_id for c in page)
            after = (page[-1].created_at, page[-1].correlation_id)
    assert len(everything) == 8
    assert paged == [c.correlation_id for c in everything]
    keys = [(c.created_at, c.correlation_id) for c in everything]
    assert keys == sorted(keys, reverse=True)
