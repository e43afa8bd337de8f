"""LangGraph's Agent Server on its PostgreSQL runtime, started for `peers_http.py`.

`langgraph-api` with `langgraph-runtime-pg` (`LANGGRAPH_RUNTIME_EDITION=pg`: runs, threads and
checkpoints in PostgreSQL, run wake-ups and streams in Redis), from a venv of its own
(`AGENT_SERVER_VENV`, default `.venv-agent-server`; `make bench-peers` makes it from
`agent-server-requirements.txt`). No licence key is needed: without one the server skips its
metadata loop and sends nothing out.

- Its database is made afresh (`PEERS_AGENT_SERVER_PG_URL`, default `peers_agent_server` on the
  bench's server); the API process applies the runtime's migrations when it starts.
- Redis is Debian's `redis-server` on a free port of 127.0.0.1, nothing saved to disk, stopped with
  the server.
- Layouts: `split` (the default, like Sursis's `serve --no-worker` + `worker`): the API
  (`uvicorn langgraph_api.server:app`, `N_JOBS_PER_WORKER=0`) and one queue process
  (`python -m langgraph_api.queue_entrypoint`, `N_JOBS_PER_WORKER=10`, the server's default);
  `single`: the API running its queue in process (`N_JOBS_PER_WORKER=10`).
- The graph is `langgraph_graph.py`'s (`LANGSERVE_GRAPHS`), the one the in-process peer runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import httpx
import sqlalchemy as sa
from common import engine_for, free_port

BENCH = Path(__file__).resolve().parent
DEFAULT_VENV = BENCH.parent / ".venv-agent-server"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/peers_agent_server"
JOBS_PER_WORKER = "10"
LAYOUTS = ("split", "single")


def descendants(pid: int) -> list[int]:
    """`pid` and every process under it."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            found.extend(descendants(int(child)))
    return found


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def fresh_pg_database(url: str) -> None:
    """Drop and create `url`'s database (its connections are ended first)."""
    name = url.rsplit("/", 1)[1]
    admin_url = url.replace("postgresql://", "postgresql+asyncpg://", 1).rsplit("/", 1)[0] + "/postgres"
    admin = engine_for(admin_url).execution_options(isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        await admin.dispose()


class RedisServer:
    """Debian's `redis-server` on a free port of 127.0.0.1, in memory only."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    async def start(self) -> None:
        command = shutil.which("redis-server")
        if command is None:
            raise RuntimeError("no redis-server: `apt-get install redis-server` (make bench-peers does it)")
        self.port = free_port()
        args = [command, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--dir", str(self.log_dir)]
        with (self.log_dir / "redis.log").open("wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)  # noqa: ASYNC220
        for _ in range(100):
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited; see {self.log_dir / 'redis.log'}")
            if self._answers():
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("redis-server did not answer in 5 s")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    @property
    def uri(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        stop(self.process)


class AgentServer:
    """The Agent Server's processes (`layout`), its PostgreSQL database and its Redis."""

    def __init__(self, log_dir: Path, layout: str = "split") -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout {layout!r}: one of {LAYOUTS}")
        self.log_dir = log_dir
        self.layout = layout
        self.url = os.environ.get("PEERS_AGENT_SERVER_PG_URL", DEFAULT_URL)
        self.redis = RedisServer(log_dir)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.base = ""

    @property
    def database(self) -> str:
        return self.url.rsplit("/", 1)[1]

    def describe(self) -> str:
        if self.layout == "single":
            return f"1 API running its queue ({JOBS_PER_WORKER} jobs)"
        return f"1 API + 1 queue process ({JOBS_PER_WORKER} jobs)"

    def _env(self, jobs: str, **extra: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("SURSIS_", "OTEL_", "VIRTUAL_ENV"))}
        return {
            **keep,
            "LANGGRAPH_RUNTIME_EDITION": "pg",
            "DATABASE_URI": self.url,
            "REDIS_URI": self.redis.uri,
            "LANGSERVE_GRAPHS": json.dumps({"agent": f"{BENCH / 'langgraph_graph.py'}:graph"}),
            "N_JOBS_PER_WORKER": jobs,
            "PYTHONPATH": str(BENCH),
            "LANGSMITH_TRACING": "false",
            "LOG_LEVEL": "WARNING",
            **extra,
        }

    def _spawn(self, args: list[str], env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"agent-server-{name}.log").open("wb") as log:
            process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.log_dir)
        self.processes.append(process)
        return process

    async def _wait(self, process: subprocess.Popen[bytes], url: str, name: str) -> None:
        async with httpx.AsyncClient(timeout=2) as client:
            for _ in range(900):
                if process.poll() is not None:
                    raise RuntimeError(f"the Agent Server's {name} exited; see agent-server-{name}.log")
                try:
                    if (await client.get(url)).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"the Agent Server's {name} did not start in 90 s")

    async def start(self) -> None:
        venv = Path(os.environ.get("AGENT_SERVER_VENV", DEFAULT_VENV))
        python = venv / "bin" / "python"
        if not python.exists():
            raise RuntimeError(f"no {python}: make bench-peers installs the Agent Server there")
        await fresh_pg_database(self.url)
        await self.redis.start()
        port = free_port()
        api_jobs = JOBS_PER_WORKER if self.layout == "single" else "0"
        api = [str(python), "-m", "uvicorn", "langgraph_api.server:app", "--host", "127.0.0.1"]
        api += ["--port", str(port), "--no-access-log", "--log-level", "warning"]
        self.base = f"http://127.0.0.1:{port}"
        # The API migrates the database; the queue process starts after it, without migrating.
        await self._wait(self._spawn(api, self._env(api_jobs), "api"), f"{self.base}/ok", "api")
        if self.layout == "split":
            health = free_port()
            env = self._env(
                JOBS_PER_WORKER,
                PORT=str(health),
                LANGGRAPH_SERVER_HOST="127.0.0.1",
                LG_RUNTIME_PG_AUTO_MIGRATE="false",
            )
            queue = self._spawn([str(python), "-m", "langgraph_api.queue_entrypoint"], env, "queue")
            await self._wait(queue, f"http://127.0.0.1:{health}/ok", "queue")

    def pids(self) -> list[int]:
        """The API's and the queue's processes (not Redis: `redis_pid`)."""
        return [pid for p in self.processes for pid in descendants(p.pid)]

    @property
    def redis_pid(self) -> int:
        assert self.redis.process is not None
        return self.redis.process.pid

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop(process)
        self.redis.stop()
