"""Is the database there and at the migrations' head? One clear sentence when it is not.

A process that starts against an unmigrated database would otherwise fail on its first query with
a long traceback ("no such table api_keys"), and on SQLite it would leave an empty file behind.
"""

from __future__ import annotations

import re
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sursis.domain.errors import Error
from sursis.infra.db.urls import (
    InvalidDatabaseUrl,
    database_url,
    plain_postgres_kwargs,
    plain_sqlite_file,
    shown_url,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

# SQLAlchemy and Alembic are imported when a check runs: the command line imports this module
# for every command, `sursis pending` and `--version` included.

__all__ = [
    "DatabaseNotReady",
    "current_revision",
    "head_revision",
    "require_head",
    "require_location",
    "shown_url",
]


class DatabaseNotReady(Error):
    """The database cannot serve: missing, unreachable or not at head. `str()` says what to do."""

    code = "database_not_ready"


def require_location(url: str) -> None:
    """Raise `DatabaseNotReady` when the URL cannot be read, or names an SQLite file in a folder
    that does not exist (SQLite makes the file, never its folder)."""
    if plain_sqlite_file(url) is None and plain_postgres_kwargs(url) is None:
        try:
            database_url(url)
        except InvalidDatabaseUrl as error:
            raise DatabaseNotReady(str(error)) from None
    path = _sqlite_file(url) if url.startswith("sqlite") else None
    if path is not None and not path.parent.is_dir():
        raise DatabaseNotReady(
            f"the folder {str(path.parent)!r} of the SQLite database {shown_url(url)} does not exist: "
            "create it or change SURSIS_DATABASE_URL"
        )


_REVISION_LINE = re.compile(r"^(down_revision|revision)\b[^=\n]*=\s*(?:[\"']([^\"']+)[\"']|None)", re.M)


def head_revision() -> str:
    """The newest migration's revision, read from the scripts' text: importing them (Alembic's
    script directory) would load Alembic, Mako and every script into each serving process for one
    string, about 9 MiB. The scripts form one chain (`tests/integration/test_database_readiness.py`
    checks that this is Alembic's own head)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (Path(__file__).resolve().parents[2] / "migrations" / "versions").glob("*.py"):
        for name, value in _REVISION_LINE.findall(script.read_text(encoding="utf-8")):
            if value:
                (revisions if name == "revision" else parents).add(value)
    [head] = revisions - parents
    return head


def _sqlite_file(url: str) -> Path | None:
    if (plain := plain_sqlite_file(url)) is not None:
        return Path(plain)
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def _current_revision(connection: Connection) -> str | None:
    """What Alembic's `alembic_version` table holds, read without loading Alembic."""
    import sqlalchemy as sa

    if not sa.inspect(connection).has_table("alembic_version"):
        return None
    found = connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    return None if found is None else str(found)


async def current_revision(url: str) -> str | None:
    """The revision the database is at (None: never migrated); `DatabaseNotReady` when it cannot
    be reached. Never creates an SQLite file."""
    require_location(url)
    if url.startswith("sqlite") and (path := _sqlite_file(url)) is not None and not path.exists():
        return None
    if plain_sqlite_file(url) is not None:
        return _sqlite_revision(url)
    if (kwargs := plain_postgres_kwargs(url)) is not None:
        return await _postgres_revision(url, kwargs)
    from sqlalchemy import exc

    from sursis.infra.db.engine import create_engine

    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_current_revision)
    except (OSError, exc.DBAPIError) as error:
        raise DatabaseNotReady(f"cannot reach the database {shown_url(url)}: {_reason(error)}") from None
    finally:
        await engine.dispose()


def _sqlite_revision(url: str) -> str | None:
    """`_current_revision` of a plain SQLite file, read by the standard library's driver, read-only:
    a deploy's `migrate` at the head then loads neither SQLAlchemy nor aiosqlite."""
    import sqlite3

    file = Path(plain_sqlite_file(url) or "").resolve()
    try:
        with closing(sqlite3.connect(f"{file.as_uri()}?mode=ro", uri=True, timeout=30)) as connection:
            if not connection.execute(_HAS_VERSION_TABLE).fetchone():
                return None
            found = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error as error:
        raise DatabaseNotReady(f"cannot reach the database {shown_url(url)}: {_reason(error)}") from None
    return None if found is None else str(found[0])


async def _postgres_revision(url: str, kwargs: dict[str, Any]) -> str | None:
    """`_current_revision` of a plain PostgreSQL URL, on one asyncpg connection with the engine's
    timeouts: `migrate` at the head and `db-check` then do not load SQLAlchemy."""
    import asyncpg

    try:
        connection = await asyncpg.connect(**kwargs, timeout=5, command_timeout=30, statement_cache_size=0)
        try:
            if not await connection.fetchval("SELECT to_regclass('alembic_version') IS NOT NULL"):
                return None
            found = await connection.fetchval("SELECT version_num FROM alembic_version")
        finally:
            await connection.close()
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise DatabaseNotReady(f"cannot reach the database {shown_url(url)}: {_reason(error)}") from None
    return None if found is None else str(found)


_HAS_VERSION_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"


def _reason(error: BaseException) -> str:
    original = getattr(error, "orig", None) or error
    text = str(original).splitlines()[0] if str(original) else type(original).__name__
    return text[:200]


async def require_head(url: str) -> None:
    """Raise `DatabaseNotReady` unless the database is reachable and at the migrations' head."""
    current = await current_revision(url)
    head = head_revision()
    if current != head:
        raise DatabaseNotReady(
            f"the database {shown_url(url)} is not migrated "
            f"(revision {current or 'none'}, head {head}): run `sursis migrate`"
        )
