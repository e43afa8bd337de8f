"""The SQL unit of work: one session, one transaction, rolled back unless committed."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from abeyance.infra.db.ops_repository import SqlOpsRepository
from abeyance.infra.db.repositories import (
    SqlAuditRepository,
    SqlConversationRepository,
    SqlMessageRepository,
    SqlPendingCallRepository,
    SqlRunRepository,
    SqlToolCallRepository,
)


class SqlUnitOfWork:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._committed = False

    async def __aenter__(self) -> Self:
        self.session = self._sessions()
        self.conversations = SqlConversationRepository(self.session)
        self.messages = SqlMessageRepository(self.session)
        self.runs = SqlRunRepository(self.session)
        self.pending = SqlPendingCallRepository(self.session)
        self.tool_calls = SqlToolCallRepository(self.session)
        self.audit = SqlAuditRepository(self.session)
        self.ops = SqlOpsRepository(self.session)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if not self._committed:
                await self.session.rollback()
        finally:
            await self.session.close()

    async def commit(self) -> None:
        await self.session.commit()
        self._committed = True


class SqlUnitOfWorkFactory:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    def __call__(self) -> SqlUnitOfWork:
        return SqlUnitOfWork(self._sessions)
