"""Behind PgBouncer in transaction mode (Debian's, started here on a free port): the migrations, the
readiness check run twice, and approval turns from several clients all work, because no prepared
statement outlives its transaction. PostgreSQL only."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient
from sqlalchemy.engine import make_url
from structlog.testing import capture_logs

from sursis.app.main import create_app
from sursis.domain.clock import utcnow
from sursis.infra.db import listen_target
from sursis.infra.db.engine import create_engine
from sursis.infra.db.migrations import upgrade_async
from sursis.infra.db.sessions import BEHIND_POOLER, pinned_sessions
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import seed_demo
from sursis.infra.pg_notify import PostgresRunNotifier
from tests.api.http_calls import create_conversation, get_run, post_message, resolve
from tests.conftest import PG_URL, admin_headers, call, make_settings, script
from tests.fresh_database import drop_database, fresh_database
from tests.pg_servers import PgBouncer

GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="pooled")], "replayed")


@pytest.fixture(scope="module")
def pgbouncer() -> Iterator[PgBouncer]:
    """Two server connections for every client: consecutive transactions of one client connection
    land on different server connections, as on a busy production pooler."""
    try:
        bouncer = PgBouncer(make_url(PG_URL).port or 5432, pool_size=2).start()
    except FileNotFoundError as missing:
        pytest.fail(str(missing))
    yield bouncer
    bouncer.stop()


@pytest.fixture
async def direct_url() -> AsyncIterator[str]:
    url = await fresh_database(PG_URL, "pooled")
    yield url
    await drop_database(url)


def pooled(bouncer: PgBouncer, direct: str) -> str:
    return bouncer.url(str(make_url(direct).database))


def sursis(command: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env["SURSIS_DATABASE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "sursis.app.cli", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_migrate_then_db_check_twice_through_the_pooler(pgbouncer: PgBouncer, direct_url: str) -> None:
    url = pooled(pgbouncer, direct_url)
    migrated = await asyncio.to_thread(sursis, "migrate", url)
    assert migrated.returncode == 0, migrated.stderr
    # Each command is a new client connection that PgBouncer may hand a server connection on which
    # the previous command prepared its statements.
    for _ in range(2):
        checked = await asyncio.to_thread(sursis, "db-check", url)
        assert checked.returncode == 0, checked.stderr
        assert "is at the migrations' head" in checked.stdout


async def test_approval_turns_from_several_clients_through_the_pooler(
    pgbouncer: PgBouncer, direct_url: str
) -> None:
    await upgrade_async(direct_url)
    engine = create_engine(direct_url)
    await seed_demo(SqlUnitOfWorkFactory(engine), "default", utcnow())
    await engine.dispose()
    headers = await admin_headers(direct_url)
    # LISTEN goes straight to PostgreSQL: it needs a session, which a transaction pooler does not keep.
    settings = make_settings(pooled(pgbouncer, direct_url), database_listen_url=direct_url, db_pool_size=3)
    statuses: list[int] = []

    async def approval_turns(client: AsyncTestClient[Any], turns: int) -> int:
        cid = await create_conversation(client)
        completed = 0
        for _ in range(turns):
            run = await post_message(client, cid, GATED)
            if run["status"] != "suspended":
                run = await get_run(client, run["id"])
            [pending] = run["pending"]
            decided = await resolve(client, pending["correlation_id"], decision="approve")
            statuses.append(decided.status_code)
            done = await get_run(client, run["id"])
            completed += done["status"] == "completed"
        return completed

    app = create_app(settings)
    async with AsyncTestClient(app=app) as client:
        client.headers.update(headers)
        done = await asyncio.gather(*(approval_turns(client, 3) for _ in range(3)))
        container = app.state.container
        assert not pinned_sessions(container.uow.engine)
    assert done == [3, 3, 3]
    assert statuses == [200] * 9


async def test_a_connection_straight_to_postgresql_is_a_session_and_caches_statements(
    pg_migrated: str, pgbouncer: PgBouncer
) -> None:
    direct = create_engine(pg_migrated)
    through = create_engine(pooled(pgbouncer, pg_migrated))
    try:
        for engine, behind in ((direct, False), (through, True)):
            async with engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
                raw = await conn.get_raw_connection()
                assert raw._connection_record is not None
                assert raw._connection_record.info[BEHIND_POOLER] is behind
                adapter: Any = raw.dbapi_connection
                assert (adapter._prepared_statement_cache is None) is behind
            assert pinned_sessions(engine) is not behind
    finally:
        await direct.dispose()
        await through.dispose()


async def test_a_listen_url_that_reaches_the_pooler_is_not_used_and_said_once(
    pg_migrated: str, pgbouncer: PgBouncer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LISTEN through a transaction pooler would lose notifications without an error (a revoked
    key served from the cache): such a URL is refused, and wake-ups fall back to polling."""
    monkeypatch.setattr(listen_target, "POOLER_RETRY_SECONDS", 0.05)
    engine = create_engine(pg_migrated)
    notifier = PostgresRunNotifier(engine, pooled(pgbouncer, pg_migrated))
    with capture_logs() as logs:
        notifier.start()
        try:
            await asyncio.sleep(1.0)
            assert not notifier.listening.is_set()
        finally:
            await notifier.stop()
            await engine.dispose()
    said = [entry for entry in logs if entry["event"] == "listen.polling"]
    assert len(said) == 1
    assert said[0]["error_class"] == "ListenNeedsSession"
    with pytest.raises(listen_target.ListenNeedsSession):
        await listen_target.connect_for_listening(pooled(pgbouncer, pg_migrated))
    connection = await listen_target.connect_for_listening(pg_migrated)
    await connection.close()
