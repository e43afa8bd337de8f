"""Real `sursis serve` / `sursis worker` processes for the fault-injection suite."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from sursis.infra.db.engine import create_engine

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """API and worker processes against one PostgreSQL database; everything is stopped at the end."""

    database_url: str
    log_dir: Path
    headers: dict[str, str] = field(default_factory=dict)
    """An admin key's `Authorization` header for the API processes."""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    """`SURSIS_*` variables every process of the cluster gets on top of the defaults."""

    def env(self, crash_at: str | None = None, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
        env.update(
            {
                "SURSIS_DATABASE_URL": self.database_url,
                "SURSIS_MIGRATE_ON_START": "false",
                "SURSIS_LEASE_SECONDS": "2",
                "SURSIS_SWEEP_SECONDS": "0.5",
                "SURSIS_WORKER_POLL_SECONDS": "0.5",
                "SURSIS_LOG_LEVEL": "WARNING",
                "SURSIS_LOG_JSON": "true",
                "SURSIS_SHUTDOWN_GRACE_SECONDS": "5",
                "SURSIS_RATE_LIMIT_PER_MINUTE": "0",
            }
        )
        env.update(self.settings)
        if crash_at:
            env["SURSIS_CRASH_AT"] = crash_at
        env.update(extra)
        return env

    def _spawn(self, args: list[str], env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{name}-{len(self.processes)}.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "sursis.app.cli", *args], cwd=ROOT, env=env, stdout=log, stderr=log
            )
        self.processes.append(process)
        return process

    async def api(self, crash_at: str | None = None) -> tuple[subprocess.Popen[bytes], str]:
        port = free_port()
        process = self._spawn(["serve", "--no-worker", "--port", str(port)], self.env(crash_at), "api")
        base = f"http://127.0.0.1:{port}"
        await wait_ready(process, base)
        return process, base

    async def embedded(self, crash_at: str | None = None) -> tuple[subprocess.Popen[bytes], str]:
        """`serve` with its worker in the same process: the layout where a message's or a
        decision's transaction hands its run to a free slot of that worker."""
        port = free_port()
        process = self._spawn(["serve", "--port", str(port)], self.env(crash_at), "embedded")
        base = f"http://127.0.0.1:{port}"
        await wait_ready(process, base)
        return process, base

    def worker(
        self, crash_at: str | None = None, concurrency: int = 2, **extra: str
    ) -> subprocess.Popen[bytes]:
        return self._spawn(
            ["worker", "--concurrency", str(concurrency)], self.env(crash_at, **extra), "worker"
        )

    def doomed_worker(self, crash_at: str | None, **extra: str) -> DoomedWorker:
        """A worker that is to die at `crash_at`; see `DoomedWorker.settle`."""
        return DoomedWorker(self, self.worker(crash_at, 2, **extra), extra)

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
        for process in self.processes:
            process.wait(timeout=10)


@dataclass
class DoomedWorker:
    """A worker killed at its crash point, and the one like it (without the crash point) that takes
    its place once it has died."""

    cluster: Cluster
    process: subprocess.Popen[bytes]
    extra: dict[str, str]
    replacement: subprocess.Popen[bytes] | None = None

    async def settle(self, client: httpx.AsyncClient, base: str, run_id: str, statuses: set[str]) -> Any:
        """The run once its status is one of `statuses`, starting the replacement when the doomed
        worker has died."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None and self.replacement is None:
                self.replacement = self.cluster.worker(None, 2, **self.extra)
            run = (await client.get(f"{base}/v1/runs/{run_id}", params={"wait": 1})).json()
            if run["status"] in statuses:
                return run
        raise AssertionError(f"run never reached {statuses}")


async def start_run(
    client: httpx.AsyncClient, base: str, content: str, agent: str = "ops"
) -> tuple[str, str]:
    """A new conversation with `agent` and its first message: the conversation's and the run's ids."""
    conversation_id = (await client.post(f"{base}/v1/conversations", json={"agent": agent})).json()["id"]
    run = (
        await client.post(f"{base}/v1/conversations/{conversation_id}/messages", json={"content": content})
    ).json()
    return str(conversation_id), str(run["id"])


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


async def wait_exit(process: subprocess.Popen[bytes], seconds: float = 20) -> int:
    deadline = time.monotonic() + seconds
    while process.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError("process did not exit in time")
        await asyncio.sleep(0.05)
    return process.returncode


def process_state(pid: int) -> str:
    """The state letter of a Linux process (`R`, `S`, `T` for stopped, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


async def wait_frozen(process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    """Until the process stopped itself at its `SURSIS_FREEZE_AT` point (state `T`)."""
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, f"process exited with {process.returncode} before freezing"
        if process_state(process.pid) in ("T", "t"):
            return
        if time.monotonic() > deadline:
            raise AssertionError("process never reached its freeze point")
        await asyncio.sleep(0.02)


async def run_row(database_url: str, run_id: str) -> dict[str, Any]:
    """The run's row as stored, lease included (the API does not show leases)."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.text(
                        "SELECT status, lease_owner, lease_expires_at, claims, error FROM runs WHERE id = :id"
                    ),
                    {"id": uuid.UUID(run_id)},
                )
            ).one()
            return dict(row._mapping)
    finally:
        await engine.dispose()


async def wait_status(
    client: httpx.AsyncClient, base: str, run_id: str, statuses: set[str], seconds: float = 30
) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        run = (await client.get(f"{base}/v1/runs/{run_id}", params={"wait": 2})).json()
        if run["status"] in statuses:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} stayed {run['status']}, wanted {statuses}")
        await asyncio.sleep(0.05)


async def check_invariants(database_url: str) -> dict[str, int]:
    """What must hold after any crash: read straight from the database."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            gaps = (
                await conn.execute(
                    sa.text(
                        "SELECT conversation_id FROM messages GROUP BY conversation_id "
                        "HAVING MAX(seq) <> COUNT(*) OR MIN(seq) <> 1"
                    )
                )
            ).all()
            assert gaps == [], f"message log with gaps: {gaps}"
            duplicate_effects = (
                await conn.execute(
                    sa.text(
                        "SELECT source_event_id, COUNT(*) FROM outbox WHERE source_event_id IS NOT NULL "
                        "GROUP BY source_event_id "
                        "HAVING COUNT(*) <> (SELECT COUNT(*) FROM tool_calls t WHERE t.tool_name = 'replay_dlq_event' "
                        "AND t.ok AND t.result->'result'->>'event_id' = outbox.source_event_id)"
                    )
                )
            ).all()
            assert duplicate_effects == [], (
                f"replays without exactly one tool call record: {duplicate_effects}"
            )
            replay_counts = (
                await conn.execute(
                    sa.text(
                        "SELECT d.id FROM dead_letters d WHERE d.replay_count <> "
                        "(SELECT COUNT(*) FROM outbox o WHERE o.source_event_id = d.id)"
                    )
                )
            ).all()
            assert replay_counts == [], f"dead letters replayed a different number of times: {replay_counts}"
            orphans = (
                await conn.execute(
                    sa.text(
                        "SELECT p.correlation_id FROM pending_calls p JOIN runs r ON r.id = p.run_id "
                        "WHERE p.status = 'awaiting' AND r.status <> 'suspended'"
                    )
                )
            ).all()
            assert orphans == [], f"awaiting calls of runs that are not suspended: {orphans}"
            counts = (
                await conn.execute(
                    sa.text(
                        "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM pending_calls), "
                        "(SELECT COUNT(*) FROM outbox WHERE source_event_id IS NOT NULL), "
                        "(SELECT COUNT(*) FROM tool_calls)"
                    )
                )
            ).one()
            return {"runs": counts[0], "pending": counts[1], "replays": counts[2], "tool_calls": counts[3]}
    finally:
        await engine.dispose()
