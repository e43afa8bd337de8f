"""Shared fixtures: real SQLite and PostgreSQL databases, migrated with Alembic, and the real app."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient
from pydantic_ai import models

from sursis.app.container import Container, build_container
from sursis.app.main import create_app
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.clock import utcnow
from sursis.domain.identity.keys import IssuedKey, KeyService
from sursis.domain.records import Principal
from sursis.infra.db.engine import create_engine
from sursis.infra.db.migrations import upgrade
from sursis.infra.db.tables import metadata
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import seed_demo
from tests.fresh_database import ensure_database

models.ALLOW_MODEL_REQUESTS = False


def _worker_database(url: str) -> str:
    """`make test` runs the tests in three processes (pytest-xdist): each gets a database of its own
    next to the test database (`test_gw0` to `test_gw2`), and so do the databases derived from it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return url
    parsed = sa.make_url(url)
    return parsed.set(database=f"{parsed.database}_{worker}").render_as_string(hide_password=False)


PG_URL = _worker_database(
    os.environ.get("SURSIS_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


async def _reset_pg_schema(url: str) -> None:
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(sa.text("DROP SCHEMA public CASCADE"))
        await conn.execute(sa.text("CREATE SCHEMA public"))
    await engine.dispose()


@pytest.fixture(scope="session")
def pg_migrated() -> str:
    """The test database, emptied whatever it held, then migrated from scratch."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, ensure_database(PG_URL)).result()
        pool.submit(asyncio.run, _reset_pg_schema(PG_URL)).result()
    upgrade(PG_URL)
    return PG_URL


async def _truncate_pg(url: str) -> None:
    engine = create_engine(url)
    async with engine.begin() as conn:
        names = ", ".join(t.name for t in metadata.sorted_tables)
        await conn.execute(sa.text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    await engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database of each kind, isolated per test."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        target = tmp_path / "sursis.db"
        shutil.copy(template, target)
        return f"sqlite+aiosqlite:///{target}"
    url: str = request.getfixturevalue("pg_migrated")
    await _truncate_pg(url)
    return url


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "model": "scripted",
        "worker_poll_seconds": 0.2,
        "sweep_seconds": 0.5,
        "lease_seconds": 5,
        "migrate_on_start": False,
        "log_json": True,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings_factory(database_url: str) -> Callable[..., Settings]:
    return lambda **overrides: make_settings(database_url, **overrides)


@pytest.fixture
async def seeded(database_url: str) -> str:
    engine = create_engine(database_url)
    await seed_demo(SqlUnitOfWorkFactory(engine), "default", utcnow())
    await engine.dispose()
    return database_url


SETUP = Principal(id="test-setup", role=Role.ADMIN, workspace=None)


@dataclass
class KeyMaker:
    """Makes API keys through the same service the `sursis keys` command uses."""

    service: KeyService

    async def issue(
        self, role: Role | str, workspace: str | None = "default", name: str | None = None
    ) -> IssuedKey:
        return await self.service.create(SETUP, role=role, workspace=workspace, name=name)

    async def make(self, role: Role | str, workspace: str | None = "default", name: str | None = None) -> str:
        """The secret of a new key, ready for `bearer(...)`."""
        return (await self.issue(role, workspace, name)).secret


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def admin_headers(database_url: str) -> dict[str, str]:
    """The header of a new admin key (home workspace `default`) for a client made outside `client`."""
    engine = create_engine(database_url)
    try:
        issued = await KeyService(SqlUnitOfWorkFactory(engine)).create(
            SETUP, role=Role.ADMIN, workspace="default"
        )
    finally:
        await engine.dispose()
    return bearer(issued.secret)


@pytest.fixture
async def keys(database_url: str) -> AsyncIterator[KeyMaker]:
    engine = create_engine(database_url)
    yield KeyMaker(KeyService(SqlUnitOfWorkFactory(engine)))
    await engine.dispose()


@pytest.fixture
async def admin_key(keys: KeyMaker) -> IssuedKey:
    return await keys.issue(Role.ADMIN, "default", name="test admin")


@pytest.fixture
async def client(seeded: str, admin_key: IssuedKey) -> AsyncIterator[AsyncTestClient[Any]]:
    """The real app; every request carries the admin key unless the test sends its own header."""
    app = create_app(make_settings(seeded))
    async with AsyncTestClient(app=app) as test_client:
        test_client.headers.update(bearer(admin_key.secret))
        yield test_client


@pytest.fixture
async def container(seeded: str) -> AsyncIterator[Container]:
    """The composition root without HTTP, and without a background worker (tests drive it)."""
    built = build_container(make_settings(seeded))
    yield built
    await built.close()


def script(*steps: Any, text: str = "please help") -> str:
    import json

    return f"{text}\nSCRIPT: {json.dumps(list(steps))}"


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def new_id() -> str:
    return str(uuid.uuid4())


async def eventually(check: Callable[[], Any], limit: float = 10.0) -> Any:
    deadline = asyncio.get_running_loop().time() + limit
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
