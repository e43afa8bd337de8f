"""A claim whose commit happened but whose answer was lost (the connection dropped right after the
commit): the worker does not leave the run to its lease, it gives it back before its next claim."""

from __future__ import annotations

import errno
from types import TracebackType
from typing import Any, Self

import pytest

from sursis.app.container import build_container
from sursis.domain.access import Role
from sursis.domain.records import Principal
from sursis.domain.states import RunStatus
from sursis.infra.db.uow import SqlUnitOfWork, SqlUnitOfWorkFactory
from tests.conftest import call, make_settings, script

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)


class AnswerLost:
    """A unit of work whose commit happens and then reports a reset connection."""

    def __init__(self, inner: SqlUnitOfWork) -> None:
        self._inner = inner

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit(self) -> None:
        await self._inner.commit()
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")


class LoseNextCommitAnswer:
    """The worker's unit-of-work factory, losing the answer of the next commit once."""

    def __init__(self, inner: SqlUnitOfWorkFactory) -> None:
        self._inner = inner
        self.armed = False

    def __call__(self) -> Any:
        if self.armed:
            self.armed = False
            return AnswerLost(self._inner())
        return self._inner()

    def reader(self) -> SqlUnitOfWork:
        return self._inner.reader()


async def test_a_claim_whose_answer_was_lost_is_given_back_before_the_next_claim(seeded: str) -> None:
    # A lease of ten minutes: only giving the run back can let it finish in this test.
    container = build_container(make_settings(seeded, lease_seconds=600))
    try:
        losing = LoseNextCommitAnswer(container.uow)
        container.worker._uow = losing
        conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
        run = await container.conversations.post_message(
            ADMIN, conversation.id, script([call("list_dlq_events")], "listed")
        )
        losing.armed = True
        with pytest.raises(ConnectionResetError):
            await container.worker.run_once()
        async with container.uow() as uow:
            held = await uow.runs.get(run.id)
        assert held is not None and held.status is RunStatus.RUNNING
        assert held.lease_owner == container.worker.id

        assert await container.worker.run_once()
        async with container.uow() as uow:
            done = await uow.runs.get(run.id)
        assert done is not None and done.status is RunStatus.COMPLETED
    finally:
        await container.close()
