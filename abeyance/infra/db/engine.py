"""Engine construction for SQLite (embedded) and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def create_engine(url: str, *, echo: bool = False, pool_size: int = 10) -> AsyncEngine:
    """An async engine tuned for the dialect.

    On SQLite every transaction starts with `BEGIN IMMEDIATE`: writers queue on the database
    lock (bounded by `busy_timeout`) instead of failing with "database is locked" when a read
    transaction later tries to write, which is what makes conditional updates race-safe there.
    """
    if is_sqlite(url):
        engine = create_async_engine(url, echo=echo, connect_args={"timeout": 30})
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
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_async_engine(
        url,
        echo=echo,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=5,
        connect_args={"timeout": 5, "command_timeout": 30},
    )
