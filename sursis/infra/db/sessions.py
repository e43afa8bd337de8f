"""Is a pooled connection a PostgreSQL session of its own, or a client of a pooler in between?

Behind a transaction pooler (PgBouncer in `pool_mode = transaction`, a managed service's pooler)
consecutive transactions of one client connection run on different server connections. A named
prepared statement made in one transaction is then missing in the next, or another client's
statement of the same name is found there (`prepared statement "__asyncpg_stmt_1__" already
exists`, `bind message supplies 2 parameters, but prepared statement requires 1`), and a
statement outside a transaction may be prepared on one server connection and executed on another.

So every new connection starts in the safe way (unnamed statements, no statement cache: see
`engine.create_engine`) and asks the server which backend it is talking to: PostgreSQL's own
`BackendKeyData` at the start of a session names its backend process, a pooler makes one up. A
connection whose backend is the one it was told of is a session: its statements are named
(`statement_name`), cached in SQLAlchemy's cache of that connection, and so parsed and planned once
per connection instead of at every execution. The cache belongs to the driver connection: a
connection opened after a failover or a restart starts with an empty one, so it never executes a
statement prepared on another server. Readers use autocommit only while every connection of
the engine has been such a session (`pinned_sessions`).
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import asyncpg
import structlog
from sqlalchemy import event, exc, util
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_

log = structlog.get_logger("sursis.db")

STATEMENT_CACHE_SIZE = 100
"""Prepared statements a session connection keeps (SQLAlchemy's default)."""
BEHIND_POOLER = "sursis_behind_pooler"
"""The key of the connection record's `info` that says what the connection was found to be."""


@dataclass
class SessionCount:
    sessions: int = 0
    pooled: int = 0


_COUNTS: WeakKeyDictionary[Engine, SessionCount] = WeakKeyDictionary()
_NAMES = itertools.count(1)


def statement_name() -> str:
    """A name no other statement of this process has: a session connection's prepared statements
    are named, so the server keeps them parsed and planned (an unnamed statement is parsed again at
    every execution; asyncpg's own naming needs its statement cache, turned off for poolers)."""
    return f"__sursis_{next(_NAMES):x}__"


FIRST_STATEMENT_SECONDS = 10.0
"""How long a new connection's first statement may take: a pooler queues it until a server
connection is free, and a connection that cannot get one in time is as good as unreachable."""


async def behind_pooler(connection: Any) -> bool:
    """Whether the asyncpg `connection` reaches PostgreSQL through a pooler. The question runs in a
    transaction, so that even behind a transaction pooler it is answered by one server connection."""
    async with asyncio.timeout(FIRST_STATEMENT_SECONDS), connection.transaction():
        backend = await connection.fetchval("SELECT pg_backend_pid()")
    return bool(backend != connection.get_server_pid())


def watch_sessions(engine: AsyncEngine) -> None:
    """Find out, for each new connection of `engine`, whether it is a session of its own."""
    count = SessionCount()
    _COUNTS[engine.sync_engine] = count

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        try:
            pooled = await_(behind_pooler(dbapi_connection.driver_connection))
        except BaseException as error:
            # The pool never got this connection: close it here, whatever stopped the question.
            dbapi_connection.driver_connection.terminate()
            if not isinstance(error, OSError | asyncpg.PostgresError | asyncpg.InterfaceError):
                raise
            # A pooler that cannot reach its server answers the first statement, not the login.
            # Raised as SQLAlchemy raises a driver's errors: the HTTP layer answers 503.
            raise exc.InterfaceError(
                "SELECT pg_backend_pid()", None, error, connection_invalidated=True
            ) from error
        record.info[BEHIND_POOLER] = pooled
        if pooled:
            if count.pooled == 0:
                log.info(
                    "database.behind_pooler", statements="unnamed, not cached", readers="in transactions"
                )
            count.pooled += 1
            return
        count.sessions += 1
        # SQLAlchemy's asyncpg adapter: cache prepared statements, each under a name of its own.
        dbapi_connection._prepared_statement_cache = util.LRUCache(STATEMENT_CACHE_SIZE)
        dbapi_connection._prepared_statement_name_func = statement_name


def pinned_sessions(engine: AsyncEngine) -> bool:
    """True while every connection `engine` opened so far was a session of its own (and for an
    engine whose connections are not watched: SQLite's). False before the first connection."""
    count = _COUNTS.get(engine.sync_engine)
    if count is None:
        return True
    return count.sessions > 0 and count.pooled == 0
