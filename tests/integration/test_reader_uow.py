"""Reader units of work: reads without a transaction of their own, and never a write."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from sursis.app.container import Container
from sursis.domain.access import Role
from sursis.domain.records import Principal

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)


async def test_a_reader_reads_what_was_committed_and_refuses_to_commit(container: Container) -> None:
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    async with container.uow.reader() as uow:
        found = await uow.conversations.get(conversation.id)
        assert found is not None and found.id == conversation.id
        with pytest.raises(RuntimeError, match="does not commit"):
            await uow.commit()


async def test_a_reader_holds_no_transaction_on_postgresql_and_a_deferred_one_on_sqlite(
    container: Container,
) -> None:
    engine = container.uow.engine.sync_engine
    sent: list[str] = []

    def record(*args: Any) -> None:
        sent.append(args[2])

    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "before_cursor_execute", record)
        try:
            async with container.uow.reader() as uow:
                await uow.conversations.get(conversation.id)
        finally:
            sa.event.remove(engine, "before_cursor_execute", record)
        assert [s for s in sent if s.startswith("BEGIN")] == ["BEGIN"], "a snapshot, not the write lock"
        return
    # The driver's connection has no transaction open: each statement is a transaction of its own.
    async with container.uow.reader() as uow:
        await uow.conversations.get(conversation.id)
        raw = await (await uow.session.connection()).get_raw_connection()
        assert raw.driver_connection.is_in_transaction() is False
    async with container.uow() as uow:
        await uow.conversations.get(conversation.id)
        raw = await (await uow.session.connection()).get_raw_connection()
        assert raw.driver_connection.is_in_transaction() is True


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_reader_on_sqlite_reads_while_a_writer_holds_the_lock(container: Container) -> None:
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    async with container.uow() as writer:
        await writer.conversations.get(conversation.id)  # BEGIN IMMEDIATE: the write lock is held
        async with container.uow.reader() as reader:
            assert await reader.conversations.get(conversation.id) is not None
