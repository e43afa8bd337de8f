"""Is the database there and at the migrations' head? One clear sentence when it is not.

A process that starts against an unmigrated database would otherwise fail on its first query with
a long traceback ("no such table api_keys"), and on SQLite it would leave an empty file behind.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sursis.domain.errors import Error
from sursis.infra.db.urls import InvalidDatabaseUrl, database_url, shown_url

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
    from sqlalchemy import exc

    from sursis.infra.db.engine import create_engine, is_sqlite

    require_location(url)
    if is_sqlite(url) and (path := _sqlite_file(url)) is not None and not path.exists():
        return None
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_current_revision)
    except (OSError, exc.DBAPIError) as error:
        raise DatabaseNotReady(f"cannot reach the database {shown_url(url)}: {_reason(error)}") from None
    finally:
        await engine.dispose()


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
