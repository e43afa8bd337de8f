"""The credential cache of the API: a verified key costs one lookup per TTL, and a revoked key is
refused on the next request in the same process, and within a notification's delay in another."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from litestar import Litestar
from litestar.testing import AsyncTestClient

from sursis.app.cli import run
from sursis.app.container import Container
from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from sursis.infra.db.engine import create_engine
from tests.conftest import SETUP, KeyMaker, bearer, eventually, make_settings

PG = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@asynccontextmanager
async def app_client(database_url: str, **overrides: Any) -> AsyncIterator[AsyncTestClient[Litestar]]:
    """One API process over the database; on PostgreSQL, once it hears key changes (cache live)."""
    async with AsyncTestClient(app=create_app(make_settings(database_url, **overrides))) as client:
        credentials = container_of(client).credentials
        if credentials is not None:
            await eventually(lambda: _true(credentials.live), limit=10)
        yield client


async def _true(value: bool) -> bool:
    return value


def container_of(client: AsyncTestClient[Litestar]) -> Container:
    container: Container = client.app.state.container
    return container


class KeyStatements:
    """The statements an app sends that read `api_keys` (its credential lookups)."""

    def __init__(self, container: Container) -> None:
        self.seen: list[str] = []
        sa.event.listen(container.uow.engine.sync_engine, "before_cursor_execute", self._statement)

    def _statement(self, *args: Any) -> None:
        if "FROM api_keys" in args[2]:
            self.seen.append(args[2])

    def take(self) -> int:
        count, self.seen = len(self.seen), []
        return count


async def me(client: AsyncTestClient[Litestar], secret: str) -> int:
    return (await client.get("/v1/me", headers=bearer(secret))).status_code


async def test_a_second_request_with_the_same_key_sends_no_credential_statement(
    seeded: str, keys: KeyMaker
) -> None:
    secret = await keys.make("operator")
    async with app_client(seeded) as client:
        statements = KeyStatements(container_of(client))
        assert await me(client, secret) == 200
        assert statements.take() == 1
        for _ in range(3):
            assert await me(client, secret) == 200
        assert statements.take() == 0


async def test_with_the_cache_off_every_request_looks_the_key_up(seeded: str, keys: KeyMaker) -> None:
    secret = await keys.make("operator")
    async with app_client(seeded, credential_cache_seconds=0) as client:
        assert container_of(client).credentials is None
        statements = KeyStatements(container_of(client))
        for _ in range(3):
            assert await me(client, secret) == 200
        assert statements.take() == 3


async def test_a_key_revoked_through_the_api_is_refused_on_the_very_next_request(
    seeded: str, keys: KeyMaker, admin_key: IssuedKey
) -> None:
    issued = await keys.issue("operator")
    async with app_client(seeded) as client:
        assert await me(client, issued.secret) == 200
        assert await me(client, issued.secret) == 200  # served from the cache
        revoked = await client.delete(f"/v1/keys/{issued.key.id}", headers=bearer(admin_key.secret))
        assert revoked.status_code == 200, revoked.text

        refused = await client.get("/v1/me", headers=bearer(issued.secret))
        never_valid = await client.get("/v1/me", headers=bearer("srs_" + "x" * 43))
    assert refused.status_code == never_valid.status_code == 401
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["code"] == never_valid.json()["code"] == "unauthenticated"


async def test_a_cached_key_is_refused_once_it_expires(seeded: str, admin_key: IssuedKey) -> None:
    async with app_client(seeded, credential_cache_seconds=3600) as client:
        expires_at = datetime.now(UTC) + timedelta(seconds=1)
        made = await client.post(
            "/v1/keys",
            json={"role": "operator", "workspace": "default", "expires_at": expires_at.isoformat()},
            headers=bearer(admin_key.secret),
        )
        assert made.status_code == 201, made.text
        assert datetime.fromisoformat(made.json()["expires_at"]) == expires_at
        secret = made.json()["key"]
        statements = KeyStatements(container_of(client))
        assert await me(client, secret) == 200
        assert await me(client, secret) == 200
        assert statements.take() == 1  # cached, with an hour of TTL left
        assert await eventually(lambda: _refused(client, secret), limit=5)

        refused = await client.get("/v1/me", headers=bearer(secret))
        assert refused.json()["code"] == "unauthenticated"
        past = await client.post(
            "/v1/keys",
            json={"role": "operator", "workspace": "default", "expires_at": "2020-01-01T00:00:00Z"},
            headers=bearer(admin_key.secret),
        )
        assert past.status_code == 422, past.text


@SQLITE
async def test_a_key_revoked_elsewhere_unheard_is_refused_once_its_entry_is_older_than_the_ttl(
    seeded: str, keys: KeyMaker
) -> None:
    """A revocation this process cannot hear of (the command line on SQLite) is bounded by the TTL:
    the entry's deadline is kept with it, and a cached key is refused after it."""
    issued = await keys.issue("operator")
    async with app_client(seeded, credential_cache_seconds=0.5) as client:
        assert await me(client, issued.secret) == 200
        await keys.service.revoke(SETUP, issued.key.id)  # like `sursis keys revoke`
        assert await eventually(lambda: _refused(client, issued.secret), limit=5)


async def _refused(client: AsyncTestClient[Litestar], secret: str) -> bool:
    return await me(client, secret) == 401


@PG
async def test_a_key_revoked_through_one_process_is_refused_by_another(
    seeded: str, keys: KeyMaker, admin_key: IssuedKey
) -> None:
    issued = await keys.issue("operator")
    async with app_client(seeded) as first, app_client(seeded, credential_cache_seconds=3600) as second:
        statements = KeyStatements(container_of(second))
        assert await me(second, issued.secret) == 200
        assert await me(second, issued.secret) == 200
        assert statements.take() == 1  # the second request was served from the cache

        revoked = await first.delete(f"/v1/keys/{issued.key.id}", headers=bearer(admin_key.secret))
        assert revoked.status_code == 200, revoked.text
        # An hour of TTL: only the notification can make the other process refuse it.
        assert await eventually(lambda: _refused(second, issued.secret), limit=2)


@PG
async def test_a_key_revoked_by_the_command_line_is_refused_by_a_serving_api(
    seeded: str, keys: KeyMaker
) -> None:
    issued = await keys.issue("operator")
    async with app_client(seeded, credential_cache_seconds=3600) as client:
        assert await me(client, issued.secret) == 200
        assert await me(client, issued.secret) == 200
        command = ["keys", "revoke", str(issued.key.id)]
        assert await asyncio.to_thread(run, command, make_settings(seeded)) == 0
        assert await eventually(lambda: _refused(client, issued.secret), limit=2)


@PG
async def test_the_cache_serves_nothing_while_the_listener_is_down_and_starts_empty_after(
    seeded: str, keys: KeyMaker
) -> None:
    issued = await keys.issue("operator")
    async with app_client(seeded, credential_cache_seconds=3600) as client:
        container = container_of(client)
        assert container.credentials is not None and container.listener is not None
        statements = KeyStatements(container)
        assert await me(client, issued.secret) == 200
        assert await me(client, issued.secret) == 200
        assert statements.take() == 1

        await terminate_listeners(seeded)
        await eventually(lambda: _true(not container.credentials.live), limit=5)  # type: ignore[union-attr]
        for _ in range(2):
            assert await me(client, issued.secret) == 200
        assert statements.take() == 2  # looked up every time

        # The listener reconnects by itself; the cache starts again, empty.
        await eventually(lambda: _true(container.credentials.live), limit=10)  # type: ignore[union-attr]
        assert await me(client, issued.secret) == 200
        assert await me(client, issued.secret) == 200
        assert statements.take() == 1


async def terminate_listeners(database_url: str) -> None:
    """Cut every `LISTEN` connection to the database (what a restart of PostgreSQL or a network
    cut does to them)."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            await conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND query LIKE 'LISTEN%'"
                )
            )
    finally:
        await engine.dispose()
