"""What the benchmark scripts share: scratch databases, real server processes, the scripted turns."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sursis import Service

ROOT = Path(__file__).resolve().parents[1]


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


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def engine_for(url: str) -> AsyncEngine:
    """A plain engine for the bench's own SQL (scratch databases, fills, counts), not the service's."""
    return create_async_engine(url)


async def ensure_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    admin = engine_for(url.rsplit("/", 1)[0] + "/postgres").execution_options(isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        query = sa.text("SELECT 1 FROM pg_database WHERE datname = :n")
        if (await conn.execute(query, {"n": name})).first() is None:
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()


async def reset_pg_schema(url: str) -> None:
    engine = engine_for(url)
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
    async with Service.open(url, migrate=True, actor="bench-setup") as svc:
        await svc.seed_demo("default")
        issued = await svc.create_api_key("admin", workspace="default")
    return {"Authorization": f"Bearer {issued.secret}"}


@dataclass(eq=False)
class DatabaseCounter:
    """Commits and statements SQLAlchemy sends from this process, on every engine (class-level
    `commit` and `before_cursor_execute` listeners on `Engine`, the sync engine under an async
    one). A statement is one cursor execution: an `executemany` counts once, and on SQLite the
    `BEGIN IMMEDIATE` the service starts each transaction with counts too. With `database`, only
    the engines connected to that database count (another library in the process may use
    SQLAlchemy too: DBOS does)."""

    def __init__(self, database: str | None = None) -> None:
        self.database = database
        self.commits = 0
        self.statements = 0

    def _counts(self, conn: Any) -> bool:
        return self.database is None or conn.engine.url.database == self.database

    def install(self) -> DatabaseCounter:
        sa.event.listen(sa.engine.Engine, "commit", self._commit)
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._statement)
        return self

    def remove(self) -> None:
        sa.event.remove(sa.engine.Engine, "commit", self._commit)
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", self._statement)

    def _commit(self, conn: Any, *_: Any) -> None:
        if self._counts(conn):
            self.commits += 1

    def _statement(self, conn: Any, *_: Any) -> None:
        if self._counts(conn):
            self.statements += 1

    def mark(self) -> tuple[int, int]:
        return self.commits, self.statements

    def since(self, mark: tuple[int, int]) -> tuple[int, int]:
        """(commits, statements) since `mark`."""
        return self.commits - mark[0], self.statements - mark[1]


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set size (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_ready(process: subprocess.Popen[bytes], base: str, seconds: float = 30) -> None:
    """Until `/readyz` answers 200; an error if the process exits or the time runs out first."""
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(f"{base}/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if process.poll() is not None:
                raise RuntimeError(f"{process.args} exited with {process.returncode}")
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{process.args} did not become ready")


def sursis_command() -> str:
    """The installed `sursis` command, next to this interpreter (a venv) or on the PATH."""
    beside = Path(sys.executable).with_name("sursis")
    found = str(beside) if beside.exists() else shutil.which("sursis")
    if found is None:
        raise RuntimeError("the `sursis` command is not installed (pip install -e .)")
    return found


CLUSTER_SETTINGS = {
    "SURSIS_LEASE_SECONDS": "2",
    "SURSIS_SWEEP_SECONDS": "0.5",
    "SURSIS_WORKER_POLL_SECONDS": "0.5",
    "SURSIS_LOG_LEVEL": "WARNING",
    "SURSIS_SHUTDOWN_GRACE_SECONDS": "5",
}
"""Short leases and polls, warnings only: the settings of the multi-process (durability) runs."""


SERVED_AGENTS = "ops,assistant,customer,world,bench.bench_agent:AGENTS"
"""What the bench's `serve` and `worker` processes serve: the built-in agents and `bench_ops`, the
approval turn's agent as the peers declare it (`bench_agent.py`)."""


@dataclass
class Processes:
    """Real `sursis serve` / `sursis worker` processes with the service's defaults (plus
    `settings`), logs to files."""

    database_url: str
    log_dir: Path
    settings: dict[str, str] = field(default_factory=dict)
    """`SURSIS_*` variables every process gets on top of the defaults."""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SURSIS_", "OTEL_"))}
        env.update(
            {
                "SURSIS_DATABASE_URL": self.database_url,
                "SURSIS_MIGRATE_ON_START": "false",
                "SURSIS_RATE_LIMIT_PER_MINUTE": "0",
                "SURSIS_LOG_JSON": "true",
                # The built-in agents and the peers' approval-turn agent (`bench_agent.py`).
                "SURSIS_AGENTS": SERVED_AGENTS,
                **self.settings,
            }
        )
        return env

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{name}-{len(self.processes)}.log").open("wb") as log:
            process = subprocess.Popen(
                [sursis_command(), *args],
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
