"""Running several processes of one command: `sursis worker --processes N`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from sursis.infra.db.engine import is_sqlite

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def refuse_sqlite(database_url: str, what: str) -> str | None:
    """Why `what` cannot run on this database, or None. Processes on one SQLite file neither wake
    one another nor write at once: scaling out is for PostgreSQL."""
    if is_sqlite(database_url):
        return (
            f"{what} needs PostgreSQL (SURSIS_DATABASE_URL=postgresql+asyncpg://...); SQLite runs one process"
        )
    return None


def supervise(argv: Sequence[str], count: int, *, grace: float) -> int:
    """Start `count` copies of `sursis <argv>` and wait. SIGTERM/SIGINT are passed on to every
    copy; when one copy ends by itself the others are stopped too, and its exit code is returned
    (a supervisor such as Docker's restart policy then starts the whole group again)."""
    command = [sys.executable, "-m", "sursis.app.cli", *argv]
    children = [subprocess.Popen(command) for _ in range(count)]
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        code = 0
        while all(child.poll() is None for child in children) and not stopping:
            time.sleep(0.2)
        if not stopping:
            code = next(child.returncode for child in children if child.returncode is not None) or 1
            stop(signal.SIGTERM, None)
        deadline = time.monotonic() + grace + 5
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
