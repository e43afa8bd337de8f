"""A process holds at most one LISTEN connection, whatever listens in it (the connection budget in
docs/operations.md counts on it): `serve` with its in-process worker one, `worker` one, none with
`SURSIS_DATABASE_LISTEN_URL=off`; and the one it holds comes back after it is killed."""

from __future__ import annotations

import subprocess

import httpx
import sqlalchemy as sa

from sursis.infra.db.engine import create_engine
from tests.conftest import eventually
from tests.faults.processes import Cluster, free_port, wait_exit, wait_ready

LISTENING = sa.text(
    "SELECT pid, query FROM pg_stat_activity WHERE datname = current_database() "
    "AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid() ORDER BY pid"
)


async def _listening(url: str) -> list[tuple[int, str]]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return [(row[0], row[1]) for row in await conn.execute(LISTENING)]
    finally:
        await engine.dispose()


async def _serve(cluster: Cluster, **extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = cluster._spawn(["serve", "--port", str(port)], cluster.env(**extra), "serve")
    base = f"http://127.0.0.1:{port}"
    await wait_ready(process, base)
    return process, base


async def _stopped(cluster: Cluster, process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    await wait_exit(process)

    async def closed() -> bool:
        return not await _listening(cluster.database_url)

    await eventually(closed)


async def test_serve_with_its_worker_holds_one_listen_connection_that_survives_being_killed(
    cluster: Cluster,
) -> None:
    process, base = await _serve(cluster)

    # The event listener's channels (`sursis_keys` last) are listened to, as the worker's are.
    async def keys_heard() -> list[tuple[int, str]]:
        rows = await _listening(cluster.database_url)
        return rows if any("sursis_keys" in query for _, query in rows) else []

    before = await eventually(keys_heard)
    assert len(before) == 1, f"one LISTEN connection for the API and its worker, not {before}"

    engine = create_engine(cluster.database_url)
    try:
        async with engine.connect() as conn:
            await conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": before[0][0]})
    finally:
        await engine.dispose()

    async def replaced() -> list[tuple[int, str]]:
        rows = await keys_heard()
        return rows if rows and rows[0][0] != before[0][0] else []

    after = await eventually(replaced, limit=20)
    assert len(after) == 1, f"one LISTEN connection again, not {after}"
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{base}/readyz")).status_code == 200
    await _stopped(cluster, process)


async def test_a_worker_process_holds_one_listen_connection(cluster: Cluster) -> None:
    process = cluster.worker()

    async def heard() -> list[tuple[int, str]]:
        assert process.poll() is None, "the worker is running"
        return await _listening(cluster.database_url)

    rows = await eventually(heard, limit=30)
    assert len(rows) == 1, f"one LISTEN connection for a worker, not {rows}"
    await _stopped(cluster, process)


async def test_no_listen_connection_when_listen_is_off(cluster: Cluster) -> None:
    process, base = await _serve(cluster, SURSIS_DATABASE_LISTEN_URL="off")
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{base}/readyz")).status_code == 200
    assert await _listening(cluster.database_url) == []
    await _stopped(cluster, process)
