"""uvicorn's server with a main loop that wakes once a second instead of ten times.

uvicorn's `Server.main_loop` sleeps 0.1 s between ticks to refresh the `date` header (once a
second) and to notice a stop signal. An idle service spends about 1.2 ms of CPU a second on those
wake-ups alone (`bench/idle.py`). Here a tick comes once a second, the header's own granularity,
and a stop signal wakes the loop at once, so shutdown is no slower.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from types import FrameType

import uvicorn

from sursis.app.loop_thread import asyncio_declared

TICK_SECONDS = 1.0
"""Between two ticks: the `date` header changes once a second."""
_TICKS_PER_SECOND = 10
"""uvicorn counts ticks of 0.1 s (`on_tick` refreshes the header when the count is a multiple of 10)."""


class QuietServer(uvicorn.Server):
    """`uvicorn.Server`, ticking once a second and woken by `handle_exit`."""

    _loop: asyncio.AbstractEventLoop | None = None
    _stirred: asyncio.Event | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        with asyncio_declared():
            await super().serve(sockets)

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stirred = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + _TICKS_PER_SECOND) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stirred.wait(), TICK_SECONDS)
            self._stirred.clear()
            should_exit = await self.on_tick(counter)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None and self._stirred is not None:
            # A signal handler runs between two bytecodes of the loop's thread: wake the loop safely.
            self._loop.call_soon_threadsafe(self._stirred.set)


def serve(app: object, options: dict[str, object]) -> bool:
    """Serve `app` in this process as `uvicorn.run` does; False when the server never started."""
    config = uvicorn.Config(app, **options)  # type: ignore[arg-type]
    server = QuietServer(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return bool(server.started)
