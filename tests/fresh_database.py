"""A new, empty PostgreSQL database next to the test database, for tests that need one of their own."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def _admin_engine(url: str) -> AsyncEngine:
    """The server's `postgres` database, with room for a slow `CREATE`/`DROP DATABASE` (each waits
    for a checkpoint: tens of seconds on a busy machine, past the service's statement limit)."""
    admin = sa.make_url(url).set(database="postgres").render_as_string(hide_password=False)
    return create_async_engine(admin, connect_args={"command_timeout": 300}, poolclass=sa.pool.NullPool)


async def fresh_database(url: str, suffix: str) -> str:
    """A new, empty database next to the test database (dropped first if a killed run left it)."""
    name = f"{sa.make_url(url).database}_{suffix}"
    engine = _admin_engine(url)
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        await engine.dispose()
    return sa.make_url(url).set(database=name).render_as_string(hide_password=False)


async def drop_database(url: str) -> None:
    name = sa.make_url(url).database
    engine = _admin_engine(url)
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await engine.dispose()


async def ensure_database(url: str) -> None:
    """Create the database of `url` unless it exists (`make soak` on a server that lacks it)."""
    name = sa.make_url(url).database
    engine = _admin_engine(url)
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            found = await conn.scalar(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            )
            if found is None:
                await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        await engine.dispose()
