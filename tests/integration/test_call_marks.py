"""The newest mark of a tool call (`call_marks.newest_mark`): what a resumed adopted tool reads to
know whether an earlier dispatch of it may have acted. It reads the newest few rows of the
conversation first and pages on only when the call's mark is older than those, so a long
conversation costs a resume no more than a short one, and a mark is found however old it is."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from sursis.domain.clock import utcnow
from sursis.domain.records import AuditEntry
from sursis.infra.agents.at_most_once import DISPATCHED, REQUESTED
from sursis.infra.agents.call_marks import newest_mark
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory

ACTIONS = (DISPATCHED, REQUESTED)


async def _marks(
    factory: SqlUnitOfWorkFactory, conversation_id: uuid.UUID, marks: list[tuple[str, str]]
) -> None:
    """(action, tool_call_id) rows of the conversation, oldest first."""
    async with factory() as uow:
        for action, tool_call_id in marks:
            entry = AuditEntry(
                action=action,
                actor="agent:payer",
                workspace="default",
                conversation_id=conversation_id,
                details={"tool_call_id": tool_call_id, "tool_name": "wire_money"},
            )
            await uow.audit.append(entry, utcnow())
        await uow.commit()


class _Reads:
    """The audit repository, counting the rows each search answers."""

    def __init__(self, audit: Any) -> None:
        self.audit, self.rows = audit, list[int]()

    async def search(self, workspace: str | None, query: Any) -> Any:
        found = await self.audit.search(workspace, query)
        self.rows.append(len(found))
        return found


async def _newest(
    factory: SqlUnitOfWorkFactory, deps: Any, tool_call_id: str, reads: list[int] | None = None
) -> str | None:
    async with factory.reader() as uow:
        audit = _Reads(uow.audit)
        found = await newest_mark(audit, deps, tool_call_id, ACTIONS)  # type: ignore[arg-type]
    if reads is not None:
        reads.extend(audit.rows)
    return found


async def test_a_mark_older_than_the_first_rows_read_is_still_found(database_url: str) -> None:
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    conversation_id, elsewhere = uuid.uuid4(), uuid.uuid4()
    deps = SimpleNamespace(conversation_id=conversation_id, workspace="default")
    try:
        # The old call was dispatched, then 250 calls of the same conversation were asked and
        # dispatched after it (more than the first rows read and than a whole page after them).
        later = [(action, f"call-{i}") for i in range(125) for action in (REQUESTED, DISPATCHED)]
        await _marks(factory, conversation_id, [(REQUESTED, "old"), (DISPATCHED, "old"), *later])
        await _marks(factory, elsewhere, [(REQUESTED, "old")])  # another conversation's row is not read
        await _marks(factory, conversation_id, [(REQUESTED, "newest")])
        assert await _newest(factory, deps, "old") == DISPATCHED
        assert await _newest(factory, deps, "call-124") == DISPATCHED
        assert await _newest(factory, deps, "call-3") == DISPATCHED
        reads: list[int] = []
        assert await _newest(factory, deps, "newest", reads) == REQUESTED
        assert reads == [8], "the call just asked is among the newest rows: nothing more is read"
        reads.clear()
        assert await _newest(factory, deps, "never-asked", reads) is None
        assert reads == [8, 200, 45], "a call never marked reads the whole conversation, page by page"
    finally:
        await engine.dispose()


async def test_a_call_asked_again_after_its_dispatch_is_not_in_doubt(database_url: str) -> None:
    """A dispatch that ended in a suspension (the tool gated itself) has a newer request row."""
    engine = create_engine(database_url)
    factory = SqlUnitOfWorkFactory(engine)
    conversation_id = uuid.uuid4()
    deps = SimpleNamespace(conversation_id=conversation_id, workspace="default")
    try:
        # Exactly the first rows read are other calls': the call's own rows are on the next page.
        others = [(REQUESTED, f"other-{i}") for i in range(8)]
        await _marks(factory, conversation_id, [(DISPATCHED, "gated"), (REQUESTED, "gated"), *others])
        assert await _newest(factory, deps, "gated") == REQUESTED
        assert await _newest(factory, deps, "missing") is None
    finally:
        await engine.dispose()
