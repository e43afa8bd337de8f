"""A new message's conversation is read by a reader, before the transaction that takes it
(`ConversationRepository.seen`), with the log the run's segment starts from. On PostgreSQL the claim
is then held to the commit (`claim_active_run(seen=)`), as the guard of the transaction's one
statement, and holds only if the conversation's row is still the version the read saw: a run that
took the conversation, wrote its log and freed it in between makes the statement write nothing
(`HeldConditionFailed`), and the message is queued again by a transaction of its own."""

from __future__ import annotations

import uuid

import pytest

from sursis.domain.clock import utcnow
from sursis.domain.ports import HeldConditionFailed
from sursis.domain.records import AuditEntry, AuditQuery, Conversation
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory


async def _conversation(factory: SqlUnitOfWorkFactory, bodies: list[str]) -> Conversation:
    conversation = Conversation.open("default", "ops", "test", utcnow())
    async with factory() as uow:
        await uow.conversations.add(conversation)
        await uow.messages.append(conversation.id, None, bodies, utcnow())
        await uow.commit()
    return conversation


async def _run_comes_and_goes(factory: SqlUnitOfWorkFactory, conversation: Conversation) -> None:
    ending = uuid.uuid4()
    async with factory() as uow:
        assert await uow.conversations.claim_active_run(conversation.id, ending, utcnow())
        await uow.messages.append(conversation.id, ending, ["the answer"], utcnow(), after_seq=3)
        await uow.conversations.release_active_run(conversation.id, ending, utcnow())
        await uow.commit()


def _claimed(conversation: Conversation) -> AuditQuery:
    return AuditQuery(conversation_id=conversation.id, actions=("test.claimed",))


def _entry(conversation: Conversation) -> AuditEntry:
    return AuditEntry(
        actor="test", action="test.claimed", workspace="default", conversation_id=conversation.id
    )


async def test_a_claim_after_a_read_holds_while_the_conversation_is_unchanged(database_url: str) -> None:
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    try:
        conversation = await _conversation(factory, ["one", "two", "three"])
        async with factory.reader() as reader:
            seen = await reader.conversations.seen(conversation.id, 1)
        assert seen is not None and seen.conversation == conversation
        run_id = uuid.uuid4()
        async with factory() as uow:
            claimed = await uow.conversations.claim_active_run(
                conversation.id, run_id, utcnow(), log_after=1, seen=seen
            )
            assert claimed
            log = await uow.messages.read(conversation.id, after_seq=1)
            assert [m.body for m in log] == ["two", "three"]
            await uow.audit.append(_entry(conversation), utcnow())
            await uow.commit()
        async with factory.reader() as reader:
            found = await reader.conversations.get(conversation.id)
            assert found is not None and found.active_run_id == run_id
    finally:
        await engine.dispose()


async def test_a_run_that_came_and_went_since_the_read_makes_the_claim_write_nothing(
    database_url: str,
) -> None:
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    try:
        conversation = await _conversation(factory, ["one", "two", "three"])
        async with factory.reader() as reader:
            seen = await reader.conversations.seen(conversation.id, 1)
        await _run_comes_and_goes(factory, conversation)
        run_id = uuid.uuid4()
        postgres = database_url.startswith("postgresql")
        async with factory() as uow:
            claimed = await uow.conversations.claim_active_run(
                conversation.id, run_id, utcnow(), log_after=1, seen=seen
            )
            assert claimed
            await uow.audit.append(_entry(conversation), utcnow())
            if postgres:
                with pytest.raises(HeldConditionFailed):
                    await uow.commit()
            else:  # no versions: the claim was made at once, and the log is read after it
                log = await uow.messages.read(conversation.id, after_seq=1)
                assert [m.body for m in log] == ["two", "three", "the answer"]
                await uow.commit()
        async with factory.reader() as reader:
            found = await reader.conversations.get(conversation.id)
            assert found is not None
            assert found.active_run_id == (None if postgres else run_id)
            audit = await reader.audit.search(None, _claimed(conversation))
            assert len(audit) == (0 if postgres else 1)
    finally:
        await engine.dispose()


async def test_a_claim_found_lost_by_a_read_lets_its_transaction_write_nothing(database_url: str) -> None:
    """A read of the transaction that sends the held claim first (a log it did not read ahead)
    meets its failure; whoever goes on anyway cannot commit the rest without it."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite claims at once: nothing is held")
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    try:
        conversation = await _conversation(factory, ["one", "two", "three"])
        async with factory.reader() as reader:
            seen = await reader.conversations.seen(conversation.id, 1)
        await _run_comes_and_goes(factory, conversation)
        async with factory() as uow:
            assert await uow.conversations.claim_active_run(
                conversation.id, uuid.uuid4(), utcnow(), log_after=1, seen=seen
            )
            with pytest.raises(HeldConditionFailed):
                await uow.messages.read(conversation.id, after_seq=0)  # not the log read ahead
            await uow.audit.append(_entry(conversation), utcnow())
            with pytest.raises(HeldConditionFailed):
                await uow.commit()
        async with factory.reader() as reader:
            found = await reader.conversations.get(conversation.id)
            assert found is not None and found.active_run_id is None
            assert await reader.audit.search(None, _claimed(conversation)) == []
    finally:
        await engine.dispose()
