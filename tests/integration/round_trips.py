"""What an engine's connections send to PostgreSQL, message by message, counted at the driver.

asyncpg sends each of these as one round trip: a statement's preparation (Parse and Describe), its
execution (Bind and Execute, or a batch of them for `executemany`) and a query without parameters
(`BEGIN`, `COMMIT`, `ROLLBACK`). The server runs a statement executed outside `BEGIN` ... `COMMIT`
as a transaction of its own, and a preparation outside one too (its Sync ends one). Only the
connections the engine's pool hands out are counted: the listening connection is not, nor
asyncpg's own look-up of a type it has not met yet (once per connection and type).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from asyncpg.connection import Connection
from asyncpg.prepared_stmt import PreparedStatement
from sqlalchemy.ext.asyncio import AsyncEngine


@dataclass(frozen=True)
class Sent:
    connection: int
    kind: str
    """`prepare`, `execute` or `query` (a text without parameters: `BEGIN`, `COMMIT`, ...)."""
    text: str
    in_transaction: bool
    named: bool = False


@dataclass
class RoundTrips:
    sent: list[Sent] = field(default_factory=list)
    connections: set[int] = field(default_factory=set)

    def clear(self) -> None:
        self.sent.clear()

    @property
    def ours(self) -> list[Sent]:
        return [s for s in self.sent if s.connection in self.connections]

    def round_trips(self) -> int:
        """Executions and queries: what every turn sends once the statements are prepared."""
        return sum(1 for s in self.ours if s.kind != "prepare")

    def prepares(self) -> list[Sent]:
        return [s for s in self.ours if s.kind == "prepare"]

    def transactions(self) -> int:
        """`BEGIN`s, and executions outside a transaction (each a transaction of the server's)."""
        return sum(
            1
            for s in self.ours
            if (s.kind == "query" and s.text.upper().startswith("BEGIN"))
            or (s.kind == "execute" and not s.in_transaction)
        )

    def prepared_again(self) -> list[Sent]:
        """Preparations of a text the same connection had already prepared (none with a cache)."""
        seen: set[tuple[int, str]] = set()
        again = []
        for s in self.prepares():
            key = (s.connection, s.text)
            if key in seen:
                again.append(s)
            seen.add(key)
        return again


@contextmanager
def count_round_trips(engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> Iterator[RoundTrips]:
    counted = RoundTrips()

    def checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        counted.connections.add(id(dbapi_connection.driver_connection))

    prepare = Connection.prepare
    execute = Connection.execute
    executemany = Connection.executemany
    fetch = PreparedStatement.fetch

    async def _prepare(self: Connection, query: str, *args: Any, **kwargs: Any) -> Any:
        named = kwargs.get("name")
        counted.sent.append(Sent(id(self), "prepare", query, self.is_in_transaction(), bool(named)))
        return await prepare(self, query, *args, **kwargs)

    async def _execute(self: Connection, query: str, *args: Any, **kwargs: Any) -> Any:
        if not args:
            counted.sent.append(Sent(id(self), "query", query, self.is_in_transaction()))
        return await execute(self, query, *args, **kwargs)

    async def _executemany(self: Connection, query: str, *args: Any, **kwargs: Any) -> Any:
        counted.sent.append(Sent(id(self), "execute", query, self.is_in_transaction()))
        return await executemany(self, query, *args, **kwargs)

    async def _fetch(self: PreparedStatement, *args: Any, **kwargs: Any) -> Any:
        connection = self._connection  # type: ignore[attr-defined]
        counted.sent.append(Sent(id(connection), "execute", self.get_query(), connection.is_in_transaction()))
        return await fetch(self, *args, **kwargs)

    monkeypatch.setattr(Connection, "prepare", _prepare)
    monkeypatch.setattr(Connection, "execute", _execute)
    monkeypatch.setattr(Connection, "executemany", _executemany)
    monkeypatch.setattr(PreparedStatement, "fetch", _fetch)
    sa.event.listen(engine.sync_engine, "checkout", checkout)
    try:
        yield counted
    finally:
        sa.event.remove(engine.sync_engine, "checkout", checkout)
