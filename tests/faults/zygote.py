"""A fork server for worker processes: imports the service once, then forks a worker per request.

A fresh `sursis worker` spends seconds importing; a thousand crashes need a new worker in
milliseconds. The soak starts this process with the workers' environment and talks to it in lines:

    stdin:  spawn <crash_at or -> <concurrency> <log path>
    stdout: pid <pid>                     (answer to a spawn)
            exit <pid> <returncode>       (a worker ended; -9 is SIGKILL)
"""

from __future__ import annotations

import os
import select
import sys

from sursis.app import cli
from sursis.app import container as _container  # noqa: F401  (imported here, once, for every child)
from sursis.app import main as _main  # noqa: F401


def _child(crash_at: str, concurrency: str, log_path: str) -> None:
    if crash_at != "-":
        os.environ["SURSIS_CRASH_AT"] = crash_at
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(0)
    code = 1
    try:
        code = cli.main(["worker", "--concurrency", concurrency])
    finally:
        os._exit(code)


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        print(f"exit {pid} {os.waitstatus_to_exitcode(status)}", flush=True)


def serve() -> None:
    buffered = b""
    while True:
        ready, _, _ = select.select([0], [], [], 0.02)
        _reap()
        if not ready:
            continue
        chunk = os.read(0, 4096)
        if not chunk:
            return
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            command, *args = line.decode().split()
            if command != "spawn":
                continue
            pid = os.fork()
            if pid == 0:
                _child(*args)
            print(f"pid {pid}", flush=True)


if __name__ == "__main__":
    serve()
    sys.exit(0)
