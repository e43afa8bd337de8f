from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.adoption.cases import CASES, UPSTREAM_CASES
from tests.adoption.harness import AdoptionHarness, install
from tests.conftest import PG_URL
from tests.faults.conftest import cluster  # noqa: F401  (the fault tests' processes, for the tests that kill one)
from tests.fresh_database import drop_database, fresh_database


@pytest.fixture(scope="session")
def adoption_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh venv with the built wheel and every package under `packages/`: its `bin`."""
    return install(tmp_path_factory.mktemp("adoption-venv"))


@pytest.fixture(scope="session")
def adoption(tmp_path_factory: pytest.TempPathFactory, adoption_bin: Path) -> Iterator[AdoptionHarness]:
    """The session's venv, one fresh PostgreSQL database, one API process."""
    root = tmp_path_factory.mktemp("adoption")
    url = asyncio.run(fresh_database(PG_URL, "adoption"))
    try:
        with AdoptionHarness(adoption_bin, url, root, CASES) as harness:
            yield harness
    finally:
        # On a busy server the drop's checkpoint can outlast the command timeout; the next session's
        # `fresh_database` drops what is left, so a slow drop is not this session's failure.
        with contextlib.suppress(TimeoutError):
            asyncio.run(drop_database(url))


@pytest.fixture(scope="session")
def upstream(tmp_path_factory: pytest.TempPathFactory, adoption_bin: Path) -> Iterator[AdoptionHarness]:
    """pydantic-ai's own examples served from the session's venv: one fresh PostgreSQL database for
    the service, and one for `sql_gen` that the example's own `database_connect` creates."""
    root = tmp_path_factory.mktemp("upstream")
    url = asyncio.run(fresh_database(PG_URL, "upstream"))
    sql_gen = sa.make_url(url).set(database=f"{sa.make_url(url).database}_sql_gen")
    asyncio.run(drop_database(sql_gen.render_as_string(hide_password=False)))
    server = sa.URL.create(
        "postgresql", sql_gen.username, sql_gen.password, sql_gen.host, sql_gen.port
    ).render_as_string(hide_password=False)
    env = {"SQL_GEN_SERVER_DSN": server, "SQL_GEN_DATABASE": str(sql_gen.database)}
    try:
        with AdoptionHarness(adoption_bin, url, root, UPSTREAM_CASES, env=env) as harness:
            yield harness
    finally:
        with contextlib.suppress(TimeoutError):
            asyncio.run(drop_database(url))
            asyncio.run(drop_database(sql_gen.render_as_string(hide_password=False)))
