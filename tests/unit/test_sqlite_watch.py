"""The watch of an SQLite file (`sqlite_watch.py`): another connection's commit wakes the waiters;
nothing does while nobody writes; a file that cannot be read stops the hearing (the loops poll
again) until it can, and a locked file wakes them rather than waiting."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from sursis.infra.db.sqlite_watch import SqliteRunNotifier, database_file

EVERY = 0.02


def _commit(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS t (x)")
        connection.execute("INSERT INTO t VALUES (1)")


async def _until(check: object, limit: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "not in time"
        await asyncio.sleep(EVERY)


@pytest.fixture
async def watched(tmp_path: Path) -> tuple[SqliteRunNotifier, Path]:
    path = tmp_path / "sursis.db"
    _commit(path)
    notifier = SqliteRunNotifier(path, EVERY)
    notifier.start()
    await _until(notifier.listening.is_set)
    yield notifier, path  # type: ignore[misc]
    await notifier.stop()


def test_the_file_of_a_url() -> None:
    assert database_file("sqlite+aiosqlite:////var/lib/sursis.db") == Path("/var/lib/sursis.db")
    assert database_file("sqlite+aiosqlite:///./sursis.db") == Path("./sursis.db")
    assert database_file("sqlite+aiosqlite://") is None
    assert database_file("sqlite+aiosqlite:///:memory:") is None


async def test_a_commit_elsewhere_wakes_the_waiters(watched: tuple[SqliteRunNotifier, Path]) -> None:
    notifier, path = watched
    with notifier.watch_activity() as stirred, notifier.watch_pending(None) as pending:
        await asyncio.sleep(EVERY * 5)
        assert not stirred.is_set(), "woken with nobody writing"
        _commit(path)
        await _until(stirred.is_set)
        await _until(pending.is_set)
    await asyncio.wait_for(notifier.wait_for_work(1.0), 2.0)


async def test_a_lost_file_stops_the_hearing_until_it_is_back(
    watched: tuple[SqliteRunNotifier, Path],
) -> None:
    notifier, path = watched
    path.rename(path.with_suffix(".moved"))
    _commit(path)  # a new file where the old one was: the open connection still reads the old one
    path.unlink()
    await _until(lambda: not notifier.listening.is_set())
    with notifier.watch_activity() as stirred:
        _commit(path)
        await _until(notifier.listening.is_set)
        await _until(stirred.is_set)  # what happened while it could not read is unknown: everyone looks


async def test_a_locked_file_wakes_rather_than_waits(watched: tuple[SqliteRunNotifier, Path]) -> None:
    notifier, path = watched
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        with notifier.watch_activity() as stirred:
            await _until(stirred.is_set)
            assert notifier.listening.is_set()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
