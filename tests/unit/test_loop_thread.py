"""The processes that own their event loop (`serve`, `worker`) declare asyncio to sniffio on the
loop's thread while it runs, so anyio and pydantic-graph stop asking asyncio for the current task
(a `getpid` system call each on Python 3.11); a thread of the worker pool is asked as before, and
the declaration ends with the loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio.to_thread
import sniffio
import uvicorn

from sursis.app.cli.commands import run_event_loop
from sursis.app.quiet_server import QuietServer


def _seen_in_pool_thread() -> str:
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return "not found"


def test_the_worker_s_loop_thread_declares_asyncio_while_it_runs_and_a_pool_thread_does_not() -> None:
    seen: dict[str, object] = {}

    async def main() -> None:
        seen["declared"] = sniffio.thread_local.name
        seen["pool thread"] = await anyio.to_thread.run_sync(_seen_in_pool_thread)

    def in_a_thread_of_its_own() -> None:  # run_event_loop starts a loop: not on the test's loop
        run_event_loop(main())
        seen["after"] = sniffio.thread_local.name

    thread = threading.Thread(target=in_a_thread_of_its_own)
    thread.start()
    thread.join(timeout=30)
    assert seen == {"declared": "asyncio", "pool thread": "not found", "after": None}


async def test_the_served_loop_declares_asyncio_until_the_server_stops() -> None:
    seen: list[str | None] = []
    server: QuietServer

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        if scope["type"] == "lifespan":
            seen.append(sniffio.thread_local.name)
            server.should_exit = True
            message = await receive()  # type: ignore[operator]
            assert message["type"] == "lifespan.startup"
            await send({"type": "lifespan.startup.complete"})  # type: ignore[operator]
            await receive()  # type: ignore[operator]
            await send({"type": "lifespan.shutdown.complete"})  # type: ignore[operator]

    server = QuietServer(uvicorn.Config(app, port=0, log_config=None, lifespan="on"))
    assert sniffio.thread_local.name is None
    await asyncio.wait_for(server.serve(), timeout=30)
    assert seen == ["asyncio"]
    assert sniffio.thread_local.name is None


def test_each_process_of_serve_workers_declares_asyncio_when_uvicorn_builds_its_app(tmp_path: Path) -> None:
    """`serve --workers N`: uvicorn builds each process's app on that process's loop thread (in a
    process of its own here: building the app settles the collector of the whole process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env["SURSIS_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    probe = (
        "import sniffio\n"
        "from sursis.app.asgi import app_from_environment\n"
        "before = sniffio.thread_local.name\n"
        "app_from_environment()\n"
        "print(before, sniffio.thread_local.name)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "asyncio"]
