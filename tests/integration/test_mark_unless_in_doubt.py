"""A dispatch mark written by the statement that asks whether the call is in doubt
(`AuditRepository.append_unless_newest`, PostgreSQL): written when the call's newest mark is not a
dispatch (or it has none), nothing written when it is, or when a sealed row newer than the call's
newest plaintext mark might be one (whether a sealed row names the call cannot be told in SQL).
SQLite holds nothing: the mark is read, then written (`call_marks.DispatchMark.dispatching`)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from sursis.domain.clock import utcnow
from sursis.domain.ports import HeldConditionFailed
from sursis.domain.records import AuditEntry, AuditQuery
from sursis.infra.agents.at_most_once import DISPATCHED, REQUESTED
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory

AMONG = (DISPATCHED, REQUESTED)


def _entry(conversation_id: uuid.UUID, action: str, tool_call_id: str) -> AuditEntry:
    return AuditEntry(
        action=action,
        actor="agent:payer",
        workspace="default",
        conversation_id=conversation_id,
        details={"tool_call_id": tool_call_id, "tool_name": "wire_money"},
    )


async def _marks(
    factory: SqlUnitOfWorkFactory, conversation_id: uuid.UUID, marks: list[tuple[str, str]]
) -> None:
    async with factory() as uow:
        for action, tool_call_id in marks:
            await uow.audit.append(_entry(conversation_id, action, tool_call_id), utcnow())
        await uow.commit()


async def _mark(factory: SqlUnitOfWorkFactory, conversation_id: uuid.UUID, tool_call_id: str) -> bool | None:
    """True: marked by the one statement; False: not (in doubt, or not told); None: not held here."""
    async with factory() as uow:
        entry = _entry(conversation_id, DISPATCHED, tool_call_id)
        if not await uow.audit.append_unless_newest(
            entry, utcnow(), among=AMONG, naming=tool_call_id, unless=DISPATCHED
        ):
            return None
        try:
            await uow.commit()
        except HeldConditionFailed:
            return False
    return True


async def _dispatches(factory: SqlUnitOfWorkFactory, conversation_id: uuid.UUID) -> int:
    async with factory.reader() as uow:
        query = AuditQuery(conversation_id=conversation_id, actions=(DISPATCHED,), limit=100)
        return len(await uow.audit.search("default", query))


@pytest.mark.parametrize(
    ("marks", "expected"),
    [
        ([], True),
        ([(DISPATCHED, "a"), (REQUESTED, "a")], True),
        ([(DISPATCHED, "b")], True),
        ([(DISPATCHED, "a")], False),
        ([(REQUESTED, "a"), (DISPATCHED, "a"), (REQUESTED, "b")], False),
    ],
    ids=["no-mark", "settled", "another-call", "in-doubt", "in-doubt-under-another"],
)
async def test_the_mark_is_written_only_when_the_call_is_not_in_doubt(
    database_url: str, marks: list[tuple[str, str]], expected: bool
) -> None:
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    try:
        conversation_id = uuid.uuid4()
        await _marks(factory, conversation_id, marks)
        before = await _dispatches(factory, conversation_id)
        marked = await _mark(factory, conversation_id, "a")
        if not database_url.startswith("postgresql"):
            assert marked is None
            return
        assert marked is expected
        assert await _dispatches(factory, conversation_id) == before + (1 if expected else 0)
    finally:
        await engine.dispose()


async def test_a_sealed_row_newer_than_the_calls_marks_is_not_told_in_sql(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite holds nothing")
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    try:
        conversation_id = uuid.uuid4()
        await _marks(factory, conversation_id, [(DISPATCHED, "a"), (REQUESTED, "a")])
        async with engine.begin() as conn:  # a row written while encryption was on: its details sealed
            await conn.execute(
                t.audit_log.insert().values(
                    at=utcnow(),
                    actor="agent:payer",
                    action=DISPATCHED,
                    workspace="default",
                    conversation_id=conversation_id,
                    details=sa.func.to_jsonb(sa.cast("v1:sealed", sa.Text())),
                )
            )
        assert await _mark(factory, conversation_id, "a") is False
        async with engine.connect() as conn:
            count = sa.select(sa.func.count()).where(t.audit_log.c.conversation_id == conversation_id)
            assert await conn.scalar(count) == 3, "nothing written"
    finally:
        await engine.dispose()
