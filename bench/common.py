"""What the benchmark scripts share: scratch databases, real server processes, the scripted turns."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from abeyance.domain.access import Role  # noqa: E402
from abeyance.domain.clock import utcnow  # noqa: E402
from abeyance.domain.keys import KeyService  # noqa: E402
from abeyance.domain.records import Principal  # noqa: E402
from abeyance.infra.db.engine import create_engine, is_sqlite  # noqa: E402
from abeyance.infra.db.migrations import upgrade  # noqa: E402
from abeyance.infra.db.uow import SqlUnitOfWorkFactory  # noqa: E402
from abeyance.infra.demo import seed_demo  # noqa: E402
from tests.faults.processes import free_port, wait_ready  # noqa: E402

BENCH_ADMIN = Principal(id="bench-setup", role=Role.ADMIN, workspace=None)


def script(*steps: Any, text: str = "please help") -> str:
    """A user message that drives the offline `scripted` model through `steps`."""
    return f"{text}\nSCRIPT: {json.dumps(list(steps))}"


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


PLAIN_TURN = script([call("list_dlq_events")], "listed")
GATED_TURN = script([call("replay_dlq_event", event_id="evt_1001", reason="bench")], "replayed")
"""One approval turn: the model proposes a gated replay, the operator approves, the model answers."""


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def ensure_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    admin = create_engine(url.rsplit("/", 1)[0] + "/postgres").execution_options(isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        query = sa.text("SELECT 1 FROM pg_database WHERE datname = :n")
        if (await conn.execute(query, {"n": name})).first() is None:
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()


async def reset_pg_schema(url: str) -> None:
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(sa.text("DROP SCHEMA public CASCADE"))
        await conn.execute(sa.text("CREATE SCHEMA public"))
    await engine.dispose()


def remove_sqlite_files(url: str) -> None:
    path = url.split("///", 1)[1]
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def fresh_database(url: str) -> dict[str, str]:
    """Empty and migrate the scratch database, seed the demo dead letters; an admin key's header."""
    if is_sqlite(url):
        remove_sqlite_files(url)
    else:
        await ensure_pg_database(url)
        await reset_pg_schema(url)
    await asyncio.to_thread(upgrade, url)
    engine = create_engine(url)
    try:
        uow = SqlUnitOfWorkFactory(engine)
        await seed_demo(uow, "default", utcnow())
        issued = await KeyService(uow).create(BENCH_ADMIN, role=Role.ADMIN, workspace="default")
    finally:
        await engine.dispose()
    return {"Authorization": f"Bearer {issued.secret}"}


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set size (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Processes:
    """Real `abeyance serve` / `abeyance worker` processes with the service's defaults, logs to files."""

    database_url: str
    log_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ABEYANCE_", "OTEL_"))}
        env.update(
            {
                "ABEYANCE_DATABASE_URL": self.database_url,
                "ABEYANCE_MIGRATE_ON_START": "false",
                "ABEYANCE_RATE_LIMIT_PER_MINUTE": "0",
                "ABEYANCE_LOG_JSON": "true",
            }
        )
        return env

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{name}-{len(self.processes)}.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "abeyance.app.cli", *args],
                cwd=ROOT,
                env=self.env(),
                stdout=log,
                stderr=log,
            )
        self.processes.append(process)
        return process

    async def serve(self, *, worker: bool) -> tuple[subprocess.Popen[bytes], str]:
        port = free_port()
        args = ["serve", "--port", str(port)] + ([] if worker else ["--no-worker"])
        process = self._spawn(args, "serve")
        base = f"http://127.0.0.1:{port}"
        await wait_ready(process, base)
        return process, base

    def worker(self, concurrency: int | None = None) -> subprocess.Popen[bytes]:
        args = ["worker"] + ([] if concurrency is None else ["--concurrency", str(concurrency)])
        return self._spawn(args, "worker")

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()


UNAVAILABLE = [0]
"""How many 503 answers (the service's pool or database busy) were retried, as a client would."""


async def send(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A request, retried with backoff on 503; any other error status raises."""
    for attempt in range(8):
        response = await client.request(method, url, **kwargs)
        if response.status_code != 503:
            break
        UNAVAILABLE[0] += 1
        await asyncio.sleep(0.05 * 2**attempt)
    response.raise_for_status()
    return response


async def settle(client: httpx.AsyncClient, base: str, run_id: str, want: str) -> dict[str, Any]:
    """Long-poll the run until it reaches `want`; a failed or cancelled run is an error."""
    while True:
        response = await send(client, "GET", f"{base}/v1/runs/{run_id}", params={"wait": 10})
        run: dict[str, Any] = response.json()
        if run["status"] == want:
            return run
        if run["status"] in {"failed", "cancelled", "completed", "suspended"}:
            raise RuntimeError(f"run {run_id} is {run['status']}, wanted {want}: {run.get('error')}")
