"""The process's one LISTEN connection: every subscription hears its channels on it, a killed
connection tells every subscription at once (its caches then serve nothing) and comes back with
every channel listened to again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.domain.notified_cache import NotifiedCache
from sursis.infra.db.engine import create_engine
from sursis.infra.db.listen_connection import ListenConnection, Subscription
from tests.conftest import eventually

LISTENING = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"
)


class Heard:
    """A subscription's channels with what they heard, and a cache told of the connection's state."""

    def __init__(self, *channels: str) -> None:
        self.payloads: list[tuple[str, str]] = []
        self.cache: NotifiedCache[str, str] = NotifiedCache(3600, live=False)
        self.subscription = Subscription(
            dict.fromkeys(channels, self._heard), up=self.cache.resume, down=self.cache.suspend
        )

    def _heard(self, _connection: object, _pid: int, channel: str, payload: str) -> None:
        self.payloads.append((channel, payload))


@pytest.fixture
async def engine(pg_migrated: str) -> AsyncIterator[AsyncEngine]:
    built = create_engine(pg_migrated)
    yield built
    await built.dispose()


async def _listening(engine: AsyncEngine) -> list[int]:
    async with engine.connect() as conn:
        return [row[0] for row in await conn.execute(sa.text(LISTENING))]


async def _notify(engine: AsyncEngine, channel: str, payload: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(sa.text("SELECT pg_notify(:c, :p)"), {"c": channel, "p": payload})


async def test_every_subscription_shares_one_connection_that_survives_being_killed(
    pg_migrated: str, engine: AsyncEngine
) -> None:
    connection = ListenConnection(pg_migrated, retry_seconds=0.05)
    runs, keys = Heard("test_work", "test_runs"), Heard("test_keys")
    connection.attach(runs.subscription)
    connection.attach(keys.subscription)
    try:
        await asyncio.wait_for(runs.subscription.listening.wait(), 10)
        await asyncio.wait_for(keys.subscription.listening.wait(), 10)
        assert runs.cache.live and keys.cache.live
        first = await _listening(engine)
        assert len(first) == 1, "both subscriptions listen on one connection"

        await _notify(engine, "test_runs", "r1")
        await _notify(engine, "test_keys", "k1")
        assert await eventually(lambda: _has(runs, ("test_runs", "r1")))
        assert await eventually(lambda: _has(keys, ("test_keys", "k1")))
        assert ("test_keys", "k1") not in runs.payloads, "a subscription hears only its channels"

        async with engine.connect() as conn:
            await conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first[0]})
        # Told at once, before it connects again: the caches serve nothing meanwhile.
        await eventually(lambda: _is(not keys.cache.live))
        await asyncio.wait_for(keys.subscription.listening.wait(), 10)
        await asyncio.wait_for(runs.subscription.listening.wait(), 10)
        again = await _listening(engine)
        assert len(again) == 1 and again != first, "one new connection replaced the killed one"
        assert runs.cache.live and keys.cache.live

        await _notify(engine, "test_work", "r2")
        await _notify(engine, "test_keys", "k2")
        assert await eventually(lambda: _has(runs, ("test_work", "r2"))), "notifications resume"
        assert await eventually(lambda: _has(keys, ("test_keys", "k2")))
    finally:
        await connection.detach(runs.subscription)
        await connection.detach(keys.subscription)
    assert not keys.cache.live, "a detached subscription's cache no longer serves"
    assert await _listening(engine) == [], "the last subscription closes the connection"


async def test_a_subscription_attached_later_joins_the_same_connection_and_leaves_it(
    pg_migrated: str, engine: AsyncEngine
) -> None:
    connection = ListenConnection(pg_migrated, retry_seconds=0.05)
    runs, events = Heard("test_runs"), Heard("test_events")
    connection.attach(runs.subscription)
    try:
        await asyncio.wait_for(runs.subscription.listening.wait(), 10)
        first = await _listening(engine)
        connection.attach(events.subscription)
        await asyncio.wait_for(events.subscription.listening.wait(), 10)
        assert await _listening(engine) == first
        await _notify(engine, "test_events", "c1")
        assert await eventually(lambda: _has(events, ("test_events", "c1")))

        await connection.detach(events.subscription)
        assert not events.subscription.listening.is_set()
        await _notify(engine, "test_events", "c2")
        await _notify(engine, "test_runs", "r1")
        assert await eventually(lambda: _has(runs, ("test_runs", "r1")))
        assert ("test_events", "c2") not in events.payloads, "a detached subscription hears nothing"
        async with engine.connect() as conn:
            query = sa.text("SELECT query FROM pg_stat_activity WHERE pid = :pid")
            last = (await conn.execute(query, {"pid": first[0]})).scalar_one()
        assert last.startswith("UNLISTEN"), "the same connection stays for the others"
    finally:
        await connection.detach(runs.subscription)


async def _has(heard: Heard, payload: tuple[str, str]) -> bool:
    return payload in heard.payloads


async def _is(value: bool) -> bool:
    return value
