"""The recovery drill: dump an encrypted PostgreSQL database with `pg_dump`, restore it into a
new one with `pg_restore`, and read every conversation with the keyring. The restored database
still knows it is encrypted and the check value of each key: without a keyring, or with other
bytes under the key's id, no process starts on it (one line, exit 2, naming the key); with a
keyring that lacks the key, every read fails with a 500 whose code and `key_id` name it
(docs/runbooks/encryption.md)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import create_async_engine

from sursis.app.cli import run as cli
from sursis.app.main import create_app
from sursis.domain.clock import utcnow
from sursis.domain.encryption import EncryptionRefused
from sursis.domain.identity.keys import IssuedKey
from sursis.infra.db.engine import create_engine
from sursis.infra.db.migrations import upgrade
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import seed_demo
from tests.api.http_calls import conversation, tool_calls
from tests.api.test_encryption_at_rest import SECRET, approved_turn, forget_key, new_key
from tests.conftest import PG_URL, SETUP, bearer, make_settings

pytestmark = [
    pytest.mark.skipif(shutil.which("pg_dump") is None, reason="needs the PostgreSQL client tools"),
    # The drill allocates enough (dumps, three apps) to start a full garbage collection, which then
    # finalises sockets an earlier test of the same process left to the collector (a connection to
    # a local server on an ephemeral port, never this test's: it talks to PostgreSQL on 5432 and to
    # in-process apps). pytest would report those here, so this test does not count them.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


def libpq(url: str) -> str:
    """The libpq form of a SQLAlchemy URL, for `pg_dump` and `pg_restore`."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(statement: str) -> None:
    """`CREATE` / `DROP DATABASE` with a generous timeout: on a busy server they wait for a checkpoint."""
    admin_url = sa.make_url(PG_URL).set(database="postgres")
    engine = create_async_engine(
        admin_url, connect_args={"command_timeout": 300}, isolation_level="AUTOCOMMIT"
    )
    try:
        async with engine.connect() as conn:
            await conn.execute(sa.text(statement))
    finally:
        await engine.dispose()


@pytest.fixture
async def databases() -> AsyncIterator[tuple[str, str]]:
    """Two new databases next to the test database (dropped first if a killed run left them)."""
    urls = []
    for suffix in ("drill_source", "drill_restored"):
        name = f"{sa.make_url(PG_URL).database}_{suffix}"
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await _admin(f'CREATE DATABASE "{name}"')
        urls.append(sa.make_url(PG_URL).set(database=name).render_as_string(hide_password=False))
    yield urls[0], urls[1]
    for url in urls:
        await _admin(f'DROP DATABASE IF EXISTS "{sa.make_url(url).database}" WITH (FORCE)')


async def admin(url: str) -> IssuedKey:
    from sursis.domain.access import Role
    from sursis.domain.identity.keys import KeyService

    engine = create_engine(url)
    try:
        await seed_demo(SqlUnitOfWorkFactory(engine), "default", utcnow())
        return await KeyService(SqlUnitOfWorkFactory(engine)).create(
            SETUP, role=Role.ADMIN, workspace="default"
        )
    finally:
        await engine.dispose()


def app_client(url: str, key: IssuedKey, keys: str) -> AsyncTestClient[Any]:
    client = AsyncTestClient(app=create_app(make_settings(url, encryption_keys=keys)))
    client.headers.update(bearer(key.secret))
    return client


async def run(*command: str) -> bytes:
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


async def test_a_restored_dump_reads_every_conversation_with_the_keyring_and_names_a_missing_key(
    databases: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = databases
    await asyncio.to_thread(upgrade, source)
    key = await admin(source)
    keyring = new_key("drill-1")
    async with app_client(source, key, keyring) as client:
        turns = [await approved_turn(client) for _ in range(3)]

    plain_dump = await run("pg_dump", "--format=plain", libpq(source))
    assert SECRET.encode() not in plain_dump
    assert b"sursis:enc:1:drill-1:" in plain_dump
    archive = tmp_path / "sursis.dump"
    await run("pg_dump", "--format=custom", f"--file={archive}", libpq(source))
    await run("pg_restore", "--no-owner", f"--dbname={libpq(target)}", str(archive))

    async with app_client(target, key, keyring) as client:
        listed = (await client.get("/v1/conversations", params={"limit": 200})).json()["items"]
        assert {c for c, _ in turns} <= {item["id"] for item in listed}
        for item in listed:
            await conversation(client, item["id"])
        for cid, run_id in turns:
            assert SECRET in str((await conversation(client, cid))["messages"])
            assert SECRET in str(await tool_calls(client, run_id))

    wrong = new_key("drill-1")  # other bytes under the right id
    for keys, said in ((wrong, "key 'drill-1' of the keyring is not the key"), (None, "(keys drill-1)")):
        settings = make_settings(target, encryption_keys=keys)
        assert await asyncio.to_thread(cli, ["encryption", "status"], settings) == 2
        assert said in capsys.readouterr().err
        with pytest.RaisesGroup(pytest.RaisesExc(EncryptionRefused, match=said), flatten_subgroups=True):
            async with AsyncTestClient(app=create_app(settings)):
                pass

    await forget_key(target, "drill-1")
    async with app_client(target, key, new_key("drill-2")) as client:
        for cid, run_id in turns:
            for path in (f"/v1/conversations/{cid}", f"/v1/runs/{run_id}/tool-calls", f"/v1/runs/{run_id}"):
                response = await client.get(path)
                assert response.status_code == 500, (path, response.text)
                assert response.json()["code"] == "encryption_key_unavailable"
                assert response.json()["key_id"] == "drill-1"
