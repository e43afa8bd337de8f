"""SQLite's wake-ups between processes: a watch on the database file's `PRAGMA data_version`.

SQLite sends nothing to the other processes of a database (a `sursis worker` beside `sursis serve`,
a command line resolving a pending call). `data_version` is the next best thing: one connection of
this process's own reads it every `every` seconds, and it changes whenever any other connection (in
this process or another) has committed. A change wakes every waiter of the notifier (they re-check
the database after waking, so a wake-up for something else costs one pass); while the watch runs,
the background loops rely on it and sleep their long safety poll (`wakeup.Hearing`), as they do on
PostgreSQL while LISTEN is up. A read costs microseconds and never waits for a lock (`timeout=0`:
a locked file counts as changed). A file moved, removed or replaced (a restore) stops the hearing
until the path can be read again. An in-memory database has no other processes: no watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from pathlib import Path

import sqlalchemy as sa
import structlog

from sursis.infra.notifier import LocalRunNotifier

log = structlog.get_logger("sursis.notify")


def database_file(url: str) -> Path | None:
    """The file of an SQLite URL; None for an in-memory database."""
    database = sa.make_url(url).database
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        return None
    return Path(database.removeprefix("file:").split("?", 1)[0])


class SqliteRunNotifier(LocalRunNotifier):
    """Local wake-ups plus the watch on the database file (see the module's docstring)."""

    def __init__(self, path: Path, every: float) -> None:
        super().__init__()
        self._path = path
        self._every = every
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()
        """Set while the watch reads the file: commits of other processes reach this one."""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="sqlite-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.listening.clear()

    async def _watch(self) -> None:
        connection: sqlite3.Connection | None = None
        identity: tuple[int, int] | None = None  # the file the connection reads
        last: int | None = None  # per connection: values of two connections are unrelated
        try:
            while True:
                try:
                    if connection is None:
                        connection, last, identity = _open(self._path), None, _identity(self._path)
                    elif _identity(self._path) != identity:
                        raise sqlite3.OperationalError("the database file was replaced or removed")
                    version = _data_version(connection)
                except sqlite3.Error as exc:
                    if _busy(exc):
                        self.wake_everyone()  # someone is writing: look again after their commit
                    else:
                        if connection is not None:
                            connection.close()
                        connection = None
                        if self.listening.is_set():
                            log.warning("sqlite.watch_lost", error=str(exc)[:200])
                            self.listening.clear()
                else:
                    if last is None and not self.listening.is_set():
                        self.wake_everyone()  # (re)connected: what happened before is unknown
                    elif version != last:
                        self.wake_everyone()
                    last = version
                    self.listening.set()
                await asyncio.sleep(self._every)
        finally:
            if connection is not None:
                connection.close()

    def wake_everyone(self) -> None:
        """Another connection committed: every waiter re-checks the database."""
        self.note_changes_unknown()
        self.wake_all()
        for waiters in (self._runs, self._conversations, self._pending):
            for events in waiters.values():
                for event in events:
                    event.set()


def _open(path: Path) -> sqlite3.Connection:
    # Read-only, never creating the file; autocommit, so no read transaction stays open between reads.
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0, isolation_level=None)


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` now (an open connection goes on reading a file moved or removed)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _data_version(connection: sqlite3.Connection) -> int:
    row = connection.execute("PRAGMA data_version").fetchone()
    return int(row[0])


def _busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
