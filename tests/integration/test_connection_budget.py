"""The connection budget: a request that waits for a pooled connection longer than the pool timeout
is answered 503 with `Retry-After`, not left hanging (PostgreSQL: SQLite has no pool to wait for)."""

from __future__ import annotations

from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from tests.conftest import _truncate_pg, admin_headers, make_settings


async def test_a_request_that_finds_no_free_connection_is_a_503_with_retry_after(pg_migrated: str) -> None:
    await _truncate_pg(pg_migrated)  # what earlier tests stored (encrypted values) is not this test's
    headers = await admin_headers(pg_migrated)
    settings = make_settings(
        pg_migrated,
        run_worker=False,
        db_pool_size=1,
        db_pool_overflow=0,
        db_pool_timeout_seconds=0.3,
        database_listen_url="off",
    )
    app = create_app(settings)
    async with AsyncTestClient(app=app) as client:
        client.headers.update(headers)
        assert (await client.post("/v1/conversations", json={"agent": "ops"})).status_code == 201
        # The only connection, taken in the app's own event loop and kept.
        held = app.state.container.uow.engine.connect()
        client.blocking_portal.call(held.start)
        try:
            answer = await client.post("/v1/conversations", json={"agent": "ops"})
        finally:
            client.blocking_portal.call(held.close)
        assert answer.status_code == 503
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.headers["Retry-After"] == "2"
        assert answer.json()["code"] == "database_unavailable"
        # The connection is back: so is the service.
        assert (await client.post("/v1/conversations", json={"agent": "ops"})).status_code == 201
