"""A unit of work's hold on the database: one SQLAlchemy Core connection, taken at the first
statement, in one transaction, with no ORM session around it.

The repositories write and read tables, never mapped objects, so the ORM's `Session` gave them
nothing but its cost: its transaction's state machine, a connection per bind, the identity map it
empties at each close. Taking, committing and closing a connection through a session cost about 230
Python calls, 140 of them SQLAlchemy's; through the connection alone about 90, 60 of them
SQLAlchemy's (`docs/performance.md`). A turn opens about eleven units of work.

`UnitConnection` keeps the part of `AsyncSession`'s surface the repositories use, with the same
meaning: `execute`, `scalar`, `scalars` and `connection` take the connection at their first use and
begin its transaction (`BEGIN` is sent with the first statement; none on a connection in
autocommit); `commit` and `rollback` end it and give the connection back to the pool, the next
statement taking a new one; `info` is the unit of work's own (the cipher, what a transaction holds);
`begun` tells whether a connection was taken (`held.begun`).

Each step SQLAlchemy's asyncio connection takes is a switch into its sync core (a greenlet made,
entered and left): taking the connection, setting its options, beginning, committing, closing. A
unit of work takes its connection, options and transaction in one switch, and commits and closes in
one: two switches a unit of work instead of four or five, the same calls inside them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

from sqlalchemy.engine import Connection, Engine, Result, ScalarResult
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

BEGUN_KEY = "sursis.begun"
"""In `info` once the unit of work took its connection (sent, or is about to send, a statement)."""


class UnitConnection:
    __slots__ = ("_connection", "bind", "info")

    def __init__(self, bind: AsyncEngine, info: Mapping[str, Any] | None = None) -> None:
        self.bind = bind
        self.info: dict[str, Any] = dict(info) if info else {}
        self._connection: AsyncConnection | None = None

    async def connection(self, execution_options: Mapping[str, Any] | None = None) -> AsyncConnection:
        """The transaction's connection; `execution_options` (autocommit) apply when this call takes
        it, as with a session, and are ignored once it is taken."""
        connection = self._connection
        if connection is None:
            sync = await greenlet_spawn(_taken, self.bind.sync_engine, execution_options)
            connection = AsyncConnection(self.bind, sync)
            self._connection = connection
            self.info[BEGUN_KEY] = True
        return connection

    async def execute(self, statement: Any, params: Any = None) -> Result[Any]:
        result: Result[Any] = await (await self.connection()).execute(statement, params)
        return result

    async def scalar(self, statement: Any, params: Any = None) -> Any:
        return await (await self.connection()).scalar(statement, params)

    async def scalars(self, statement: Any, params: Any = None) -> ScalarResult[Any]:
        return await (await self.connection()).scalars(statement, params)

    def get_bind(self) -> AsyncEngine:
        return self.bind

    @asynccontextmanager
    async def begin_nested(self) -> AsyncIterator[None]:
        """A savepoint: released when the block ends, rolled back when it raises."""
        async with (await self.connection()).begin_nested():
            yield

    async def commit(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await greenlet_spawn(_committed, connection.sync_connection)

    async def rollback(self) -> None:
        await self.close()

    async def close(self) -> None:
        """Gives the connection back, rolling back what was not committed."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def _taken(engine: Engine, execution_options: Mapping[str, Any] | None) -> Connection:
    """A connection from the pool with `execution_options` set and its transaction begun (in the
    sync core: what `AsyncEngine.connect`, `execution_options` and `begin` each do)."""
    sync = engine.connect()
    try:
        if execution_options:
            sync.execution_options(**execution_options)
        sync.begin()
    except BaseException:
        sync.close()
        raise
    return sync


def _committed(sync: Connection | None) -> None:
    """Commit, then give the connection back to the pool, also when the commit failed."""
    assert sync is not None
    try:
        sync.commit()
    finally:
        sync.close()


UnitConnections = Callable[[], UnitConnection]
"""Makes a unit of work's connection (an engine and the info each starts with)."""
