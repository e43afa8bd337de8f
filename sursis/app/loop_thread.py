"""The thread that runs Sursis's own event loop (`serve`, `worker`) declares it runs asyncio.

anyio and pydantic-graph ask sniffio which async library runs (`sniffio.current_async_library`)
dozens of times a turn. Undeclared, sniffio finds out by asking asyncio for the current task, and on
Python 3.11 each `asyncio.current_task()` makes a `getpid` system call (the running loop's check for
a fork): 2.4-2.7 % of a serving process's busy CPU went to that question
(docs/performance.md). sniffio reads the thread's declared library first (`thread_local.name`, which
it keeps for event loops to set), so the processes that own their loop declare it for as long as it
runs; a thread of the worker pool (sync tools) declares nothing and is asked as before. An embedded
`Service` runs on its host's loop and leaves the host's threads alone: its worker loops declare in
their own tasks' context instead (`sursis/infra/supervisor.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sniffio


def declare_asyncio() -> str | None:
    """Declare that this thread runs asyncio (uvloop is asyncio's); returns the declaration it
    replaced."""
    previous: str | None = sniffio.thread_local.name
    sniffio.thread_local.name = "asyncio"
    return previous


@contextmanager
def asyncio_declared() -> Iterator[None]:
    """This thread runs asyncio until the block ends."""
    previous = declare_asyncio()
    try:
        yield
    finally:
        sniffio.thread_local.name = previous
