"""Engine construction for SQLite (embedded) and PostgreSQL."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

READ_ONLY = "sursis_read_only"


def reader_options(engine: AsyncEngine) -> dict[str, Any]:
    """The execution options of reader units of work: autocommit on PostgreSQL; on SQLite (whose
    connections run in the driver's autocommit mode, `BEGIN` issued here) a deferred `BEGIN`."""
    if engine.dialect.name == "sqlite":
        return {READ_ONLY: True}
    return {"isolation_level": "AUTOCOMMIT", READ_ONLY: True}


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def create_engine(url: str, *, echo: bool = False, pool_size: int = 10) -> AsyncEngine:
    """An async engine tuned for the dialect.

    On SQLite every transaction starts with `BEGIN IMMEDIATE`: writers queue on the database
    lock (bounded by `busy_timeout`) instead of failing with "database is locked" when a read
    transaction later tries to write, which is what makes conditional updates race-safe there.
    A reader unit of work (`reader_options`), which never writes, starts with a deferred `BEGIN`.

    SQL parameters (key hashes, message text) are never put in an error's text (`hide_parameters`).
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
    engine = create_async_engine(
        url,
        echo=echo,
        hide_parameters=True,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=5,
        connect_args={"timeout": 5, "command_timeout": 30},
    )
    ping_idle_connections(engine)
    return engine


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
