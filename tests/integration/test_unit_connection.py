"""A unit of work's connection (`sursis/infra/db/unit_connection.py`) on PostgreSQL: taken with its
options and its transaction in one switch into SQLAlchemy's sync core, committed and given back in
one, with the meaning SQLAlchemy's own steps have: a transaction until the commit, autocommit when
asked, the connection back in the pool also when the commit fails."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.infra.db import unit_connection
from sursis.infra.db.engine import create_engine
from sursis.infra.db.event_repositories import AUTOCOMMIT
from sursis.infra.db.unit_connection import BEGUN_KEY, UnitConnection

BACKEND = sa.text("SELECT pg_backend_pid()")
XID = sa.text("SELECT txid_current()")
"""The transaction's id: the same for each statement of one transaction."""


@pytest.fixture
def switches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of each function the unit of work runs in SQLAlchemy's sync core."""
    seen: list[str] = []
    spawn = unit_connection.greenlet_spawn

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(fn.__name__)
        return await spawn(fn, *args, **kwargs)

    monkeypatch.setattr(unit_connection, "greenlet_spawn", counted)
    return seen


async def test_a_unit_takes_and_gives_back_its_connection_in_two_switches(
    pg_migrated: str, switches: list[str]
) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    units = functools.partial(UnitConnection, engine)
    try:
        async with units() as unit:
            assert unit.info.get(BEGUN_KEY) is None
            first = await unit.scalar(XID)
            assert await unit.scalar(XID) == first  # one transaction across statements
            assert unit.info[BEGUN_KEY] is True
            await unit.commit()
        assert switches == ["_taken", "_committed"]
        assert engine.sync_engine.pool.checkedout() == 0
    finally:
        await engine.dispose()


async def test_autocommit_asked_when_the_connection_is_taken_commits_each_statement(pg_migrated: str) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    units = functools.partial(UnitConnection, engine)
    try:
        async with units() as unit:
            await unit.connection(execution_options=AUTOCOMMIT)
            assert await unit.scalar(XID) != await unit.scalar(XID)  # each statement its own
            await unit.connection(execution_options=None)  # options apply when it is taken only
            assert await unit.scalar(XID) != await unit.scalar(XID)
        async with units() as unit:
            await unit.connection()
            assert await unit.scalar(XID) == await unit.scalar(XID)
    finally:
        await engine.dispose()


async def test_a_failed_commit_still_gives_the_connection_back(pg_migrated: str) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    admin = create_engine(pg_migrated)
    units = functools.partial(UnitConnection, engine)
    try:
        for _ in range(3):  # the pool holds two: a connection kept by a failed commit would show
            async with units() as unit:
                pid = await unit.scalar(BACKEND)
                async with admin.connect() as conn:
                    await conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                with pytest.raises(sa.exc.DBAPIError):
                    await unit.commit()
            assert engine.sync_engine.pool.checkedout() == 0
        async with units() as unit:
            assert await unit.scalar(BACKEND) > 0
            await unit.commit()
    finally:
        await admin.dispose()
        await engine.dispose()
