"""`sursis worker --processes N` and `sursis serve --workers N`, as real processes on PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sursis import Service
from sursis.app.cli import run
from tests.conftest import _truncate_pg, make_settings


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def _wait_for(check: object, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


@contextlib.contextmanager
def _command(url: str, cwd: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env.update(
        SURSIS_DATABASE_URL=url,
        SURSIS_WORKER_POLL_SECONDS="0.2",
        SURSIS_LOG_JSON="true",
        SURSIS_SHUTDOWN_GRACE_SECONDS="2",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "sursis.app.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
async def pg_url(pg_migrated: str) -> str:
    await _truncate_pg(pg_migrated)
    return pg_migrated


async def test_worker_processes_share_the_queue_and_stop_together(pg_url: str, tmp_path: Path) -> None:
    with _command(pg_url, tmp_path, "worker", "--processes", "2", "--concurrency", "2") as supervisor:
        _wait_for(lambda: len(_children(supervisor.pid)) == 2)
        workers = _children(supervisor.pid)
        assert all("sursis.app.cli worker" in _cmdline(pid) for pid in workers)
        async with Service.open(pg_url, model="scripted") as svc:
            runs = []
            for _ in range(4):
                conversation = await svc.start_conversation("assistant")
                runs.append(await svc.send(conversation.id, "hello"))
            views = await asyncio.gather(*(svc.wait_for_run(r.id, within=30) for r in runs))
        assert [v.run.status for v in views] == ["completed"] * 4
        supervisor.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(supervisor.wait, 30) == 0
        assert not any(_running(pid) for pid in workers)


def _running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    with contextlib.suppress(OSError):
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    return False


async def test_a_worker_that_dies_stops_the_group_with_its_exit_code(pg_url: str, tmp_path: Path) -> None:
    with _command(pg_url, tmp_path, "worker", "--processes", "2") as supervisor:
        _wait_for(lambda: len(_children(supervisor.pid)) == 2)
        os.kill(_children(supervisor.pid)[0], signal.SIGKILL)
        assert await asyncio.to_thread(supervisor.wait, 30) != 0


async def test_serve_runs_several_api_processes_on_one_port(pg_url: str, tmp_path: Path) -> None:
    with (
        socket_port() as port,
        _command(pg_url, tmp_path, "serve", "--workers", "2", "--no-worker", "--port", str(port)) as server,
    ):
        _wait_for(lambda: _healthy(port), limit=60)
        spawned = [pid for pid in _children(server.pid) if "spawn_main" in _cmdline(pid)]
        assert len(spawned) == 2, [_cmdline(p) for p in _children(server.pid)]
        server.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.wait, 30) == 0


def _healthy(port: int) -> bool:
    with contextlib.suppress(httpx.TransportError):
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    return False


@contextlib.contextmanager
def socket_port() -> Iterator[int]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    yield port


def test_several_processes_are_refused_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'one.db'}")
    assert run(["worker", "--processes", "2"], settings) == 2
    assert run(["serve", "--workers", "3"], settings) == 2
    assert capsys.readouterr().err.count("needs PostgreSQL") == 2
    with pytest.raises(SystemExit):
        run(["worker", "--processes", "0"], settings)
