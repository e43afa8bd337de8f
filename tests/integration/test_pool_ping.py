"""Pooled PostgreSQL connections: pinged only after sitting idle, replaced when the ping fails."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from sursis.infra.db import engine as engine_module
from sursis.infra.db.engine import create_engine


async def backend_pid(engine: sa.ext.asyncio.AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())


async def test_a_dropped_idle_connection_is_replaced_without_an_error(
    pg_migrated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    admin = create_engine(pg_migrated)
    try:
        first = await backend_pid(engine)
        assert await backend_pid(engine) == first  # the pool hands the same connection back
        async with admin.connect() as conn:
            await conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_SECONDS", 0.0)
        # The pooled connection is dead; its ping fails and the checkout gets a new one.
        replaced = await backend_pid(engine)
        assert replaced != first
    finally:
        await engine.dispose()
        await admin.dispose()


async def test_a_connection_just_returned_is_not_pinged(pg_migrated: str) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    pings: list[object] = []
    dialect = engine.sync_engine.dialect
    original = dialect.do_ping

    def counting_ping(dbapi_connection: object) -> bool:
        pings.append(dbapi_connection)
        return original(dbapi_connection)

    dialect.do_ping = counting_ping  # type: ignore[method-assign]
    try:
        for _ in range(5):
            await backend_pid(engine)
        assert pings == []
    finally:
        await engine.dispose()


async def test_a_connection_that_reached_a_standby_is_dropped(pg_migrated: str) -> None:
    """A read-only refusal (SQLSTATE 25006: the primary was demoted under the connection) counts as
    a lost connection: the pool opens a new one, which `target_session_attrs` sends to the primary."""
    engine = create_engine(pg_migrated, pool_size=1)
    try:
        async with engine.connect() as conn:
            first = int((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())
            await conn.execute(sa.text("SET SESSION default_transaction_read_only = on"))
            await conn.commit()
        with pytest.raises(sa.exc.DBAPIError) as refused:
            async with engine.begin() as conn:
                await conn.execute(sa.text("CREATE TABLE read_only_probe (i int)"))
        assert refused.value.connection_invalidated
        assert await backend_pid(engine) != first
    finally:
        await engine.dispose()
