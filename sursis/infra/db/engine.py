"""Engine construction for SQLite (embedded) and PostgreSQL."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sursis.infra.db.sessions import watch_sessions
from sursis.infra.db.urls import database_url

READ_ONLY = "sursis_read_only"


def reader_options(engine: AsyncEngine) -> dict[str, Any]:
    """The execution options of reader units of work: autocommit on PostgreSQL; on SQLite (whose
    connections run in the driver's autocommit mode, `BEGIN` issued here) a deferred `BEGIN`.

    On PostgreSQL a reader uses them only while the engine's connections are known to be sessions
    of their own (`sessions.pinned_sessions`): behind a transaction pooler a statement outside a
    transaction may be prepared on one server connection and executed on another."""
    if engine.dialect.name == "sqlite":
        return {READ_ONLY: True}
    return {"isolation_level": "AUTOCOMMIT", READ_ONLY: True}


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """A process's share of the database's connections (docs/operations.md, the connection budget)."""

    size: int = 10
    """Connections kept open."""
    overflow: int = 10
    """More opened under a burst, closed when returned."""
    timeout: float = 5.0
    """Seconds a request waits for a connection before it is answered 503 (`Retry-After`)."""


def create_engine(
    url: str, *, echo: bool = False, pool_size: int | None = None, limits: PoolLimits | None = None
) -> AsyncEngine:
    """An async engine tuned for the dialect.

    On SQLite every transaction starts with `BEGIN IMMEDIATE`: writers queue on the database
    lock (bounded by `busy_timeout`) instead of failing with "database is locked" when a read
    transaction later tries to write, which is what makes conditional updates race-safe there.
    A reader unit of work (`reader_options`), which never writes, starts with a deferred `BEGIN`.

    SQL parameters (key hashes, message text) are never put in an error's text (`hide_parameters`).

    On PostgreSQL the pool hands out the connection returned last (`pool_use_lifo`): a process then
    works on the few connections its load needs, and each prepared statement reaches PostgreSQL's
    cached plan after its first executions on those (the first five of a statement on a connection
    are planned at each bind). Handed out in turn (SQLAlchemy's default), the ten connections of the
    pool each planned each statement again for its first five executions there: at two hundred
    turns, more planning than execution on the server (docs/performance.md, the database's share).

    On PostgreSQL a new connection prepares only unnamed statements and caches none until it is
    known to be a session of its own (`sessions.watch_sessions`): behind a transaction pooler
    (PgBouncer in transaction mode) no prepared statement outlives its transaction. Every host of a
    multi-host URL (`urls.py`) is passed on, with `target_session_attrs`.
    """
    if is_sqlite(url):
        engine = create_async_engine(url, echo=echo, hide_parameters=True, connect_args={"timeout": 30})
        sync_engine = engine.sync_engine

        @event.listens_for(sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(sync_engine, "begin")
        def _on_begin(conn: Any) -> None:
            reads_only = conn.get_execution_options().get(READ_ONLY)
            conn.exec_driver_sql("BEGIN" if reads_only else "BEGIN IMMEDIATE")

        return engine
    limits = limits or PoolLimits()
    if pool_size is not None:
        limits = PoolLimits(size=pool_size, overflow=pool_size, timeout=limits.timeout)
    engine = create_async_engine(
        database_url(url),  # an unreadable URL: `InvalidDatabaseUrl`, one line, no password
        echo=echo,
        hide_parameters=True,
        pool_size=limits.size,
        max_overflow=limits.overflow,
        pool_timeout=limits.timeout,
        pool_use_lifo=True,
        connect_args={
            "timeout": 5,
            "command_timeout": 30,
            # asyncpg's own cache names statements per connection (`__asyncpg_stmt_1__`), which
            # collide behind a pooler; SQLAlchemy's cache is turned on per connection instead.
            "statement_cache_size": 0,
            "prepared_statement_cache_size": 0,
            "prepared_statement_name_func": unnamed_statement,
        },
    )
    watch_sessions(engine)
    ping_idle_connections(engine)
    drop_standby_connections(engine)
    decode_jsonb_in_c(engine)
    return engine


def decode_jsonb_in_c(engine: AsyncEngine) -> None:
    """`jsonb` values cross asyncpg in its text format, encoded by `str` and decoded by `json.loads`
    themselves: no Python function per value.

    SQLAlchemy's asyncpg dialect registers a binary codec for `jsonb` on each new connection, with a
    Python encoder and decoder that add and strip the format's version byte around the same JSON
    text; decoding the rows of a turn through it was SQLAlchemy's largest frame in a turn's profile
    (docs/performance.md). The dialect names the method as the one to override; the values the
    repositories read and bind are the same (SQLAlchemy's JSON types serialize to text before the
    codec, and its deserializer is `json.loads`)."""
    dialect = engine.sync_engine.dialect
    if not hasattr(dialect, "setup_asyncpg_jsonb_codec") or getattr(dialect, "_json_deserializer", None):
        return

    async def jsonb_as_text(connection: Any) -> None:
        await connection._connection.set_type_codec(
            "jsonb", encoder=str, decoder=json.loads, schema="pg_catalog", format="text"
        )

    dialect.setup_asyncpg_jsonb_codec = jsonb_as_text


def drop_standby_connections(engine: AsyncEngine) -> None:
    """A statement refused as read-only (SQLSTATE 25006) means the connection reached a standby:
    the primary it was opened to was demoted. Treat it as a lost connection, so that the pool drops
    its connections and the next ones find the primary (`target_session_attrs=read-write`)."""

    @event.listens_for(engine.sync_engine, "handle_error")
    def _on_error(context: Any) -> None:
        original = context.original_exception
        if getattr(original, "sqlstate", None) == "25006" or getattr(original, "pgcode", None) == "25006":
            context.is_disconnect = True


def unnamed_statement() -> str:
    """The name of every statement prepared until a connection is known to be a session: the unnamed
    statement, which the next statement's `Parse` replaces on the server."""
    return ""


PING_AFTER_IDLE_SECONDS = 5.0
"""A pooled connection idle for longer than this is pinged before it is handed out."""


def ping_idle_connections(engine: AsyncEngine) -> None:
    """Pre-ping, but only connections that sat idle in the pool.

    `pool_pre_ping` would add a round trip to every checkout, and a turn checks out a connection
    for each of its transactions. A connection returned a moment ago is alive as far as a ping
    can tell; one that sat idle may have been dropped by a restart or a firewall. Such a
    connection that fails its ping is replaced (the pool retries the checkout); a failure on a
    busy connection still invalidates the pool, as SQLAlchemy does on any disconnect.
    """
    sync_engine = engine.sync_engine
    dialect = sync_engine.dialect

    @event.listens_for(sync_engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as error:
            raise exc.DisconnectionError(f"an idle pooled connection failed its ping: {error}") from error
