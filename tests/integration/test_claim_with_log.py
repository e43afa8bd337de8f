"""The statement that claims a conversation for a new run reads the conversation's log with it
(PostgreSQL: `SqlConversationRepository.claim_active_run(log_after=)`), in that statement's snapshot.
A run that ends while the claim waits for its row (its last messages written, the conversation
freed) must not leave the new run a log without them: the claim is then made again on its own, and
the log read after it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from sursis.domain.clock import utcnow
from sursis.domain.records import Conversation
from sursis.infra.db.engine import create_engine
from sursis.infra.db.held import flush_held
from sursis.infra.db.uow import SqlUnitOfWorkFactory


async def _conversation(factory: SqlUnitOfWorkFactory, bodies: list[str]) -> Conversation:
    conversation = Conversation.open("default", "ops", "test", utcnow())
    async with factory() as uow:
        await uow.conversations.add(conversation)
        await uow.messages.append(conversation.id, None, bodies, utcnow())
        await uow.commit()
    return conversation


async def test_a_claim_reads_the_log_after_what_the_caller_holds(database_url: str) -> None:
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    try:
        conversation = await _conversation(factory, ["one", "two", "three"])
        async with factory() as uow:
            assert await uow.conversations.claim_active_run(
                conversation.id, uuid.uuid4(), utcnow(), log_after=1
            )
            log = await uow.messages.read(conversation.id, after_seq=1)
            assert [m.seq for m in log] == [2, 3]
            assert not await uow.conversations.claim_active_run(
                conversation.id, uuid.uuid4(), utcnow(), log_after=3
            )
            await uow.commit()
    finally:
        await engine.dispose()


async def test_a_run_ending_while_the_claim_waits_leaves_its_messages_in_the_log(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite's write lock serializes the claim and the run's end")
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    try:
        conversation = await _conversation(factory, ["one"])
        ending = uuid.uuid4()
        ended = asyncio.Event()
        async with factory() as run_end:
            # A whole run in one transaction, begun before the new message's claim and committed
            # while that claim waits for the conversation's row: taken, its answer written, freed.
            # The claim's snapshot saw the conversation free and the log without the answer.
            assert await run_end.conversations.claim_active_run(conversation.id, ending, utcnow())
            await run_end.messages.append(conversation.id, ending, ["the answer"], utcnow(), after_seq=1)
            await run_end.conversations.release_active_run(conversation.id, ending, utcnow())
            await flush_held(run_end.session)  # sent now: the row is locked until the commit

            async def claim() -> list[int]:
                async with factory() as uow:
                    claimed = await uow.conversations.claim_active_run(
                        conversation.id, uuid.uuid4(), utcnow(), log_after=1
                    )
                    assert claimed and ended.is_set()
                    log = await uow.messages.read(conversation.id, after_seq=1)
                    await uow.commit()
                    return [m.seq for m in log]

            waiting = asyncio.create_task(claim())
            await asyncio.sleep(0.5)
            assert not waiting.done(), "the claim waits for the ending run's transaction"
            ended.set()
            await run_end.commit()
        assert await waiting == [2], "the ending run's answer is in the new run's log"
    finally:
        await engine.dispose()
