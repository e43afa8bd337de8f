"""A direct PostgreSQL session prepares each statement once, under a name, and executes it again by
that name: the server parses and plans it once per connection. A connection opened after the old
one was lost starts with no prepared statement, and asks for none it does not have."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.infra.db import engine as engine_module
from sursis.infra.db.engine import create_engine

STATEMENT = sa.text("SELECT count(*) FROM runs WHERE status = :status")


async def prepared(engine: AsyncEngine) -> tuple[int, list[tuple[str, int]]]:
    """The backend of the pool's connection, and the statements it has prepared (with how many
    times each was planned) that read `runs`."""
    async with engine.connect() as conn:
        pid = int((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())
        rows = await conn.execute(
            sa.text(
                "SELECT name, generic_plans + custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'SELECT count(*) FROM runs%'"
            )
        )
        return pid, [(str(name), int(plans)) for name, plans in rows]


async def run_statement(engine: AsyncEngine, times: int) -> None:
    for _ in range(times):
        async with engine.connect() as conn:
            await conn.execute(STATEMENT, {"status": "queued"})


async def test_a_session_prepares_a_statement_once_and_executes_it_by_name(pg_migrated: str) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    try:
        await run_statement(engine, 5)
        _, statements = await prepared(engine)
        [(name, plans)] = statements
        assert name.startswith("__sursis_")
        assert plans == 5  # executed five times, prepared (parsed) once
    finally:
        await engine.dispose()


async def test_a_new_connection_after_a_lost_one_prepares_its_statements_again(
    pg_migrated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    admin = create_engine(pg_migrated)
    try:
        await run_statement(engine, 2)
        first, _ = await prepared(engine)
        async with admin.connect() as conn:
            await conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_SECONDS", 0.0)  # found lost, replaced
        await run_statement(engine, 3)  # no "prepared statement does not exist"
        second, statements = await prepared(engine)
        assert second != first
        [(name, plans)] = statements
        assert name.startswith("__sursis_")
        assert plans == 3
    finally:
        await engine.dispose()
        await admin.dispose()
