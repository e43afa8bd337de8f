"""The served process's main loop: one tick a second, the `date` header still refreshed at each,
and a stop signal heard at once rather than at the next tick."""

from __future__ import annotations

import asyncio
import signal

import uvicorn

from sursis.app.quiet_server import TICK_SECONDS, QuietServer


async def _app(scope: object, receive: object, send: object) -> None:  # pragma: no cover - never called
    raise AssertionError("no request is made")


def _server() -> tuple[QuietServer, list[int]]:
    server = QuietServer(uvicorn.Config(_app, log_config=None))
    ticks: list[int] = []
    original = server.on_tick

    async def counted(counter: int) -> bool:
        ticks.append(counter)
        return await original(counter)

    server.on_tick = counted  # type: ignore[method-assign]
    return server, ticks


async def test_every_tick_refreshes_the_date_header_and_a_stop_signal_ends_the_loop_before_the_next_tick() -> (
    None
):
    server, ticks = _server()
    server.config.load()
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, server.handle_exit, signal.SIGTERM, None)
    await asyncio.wait_for(server.main_loop(), timeout=10)
    # uvicorn's own loop would have ticked a few times at 0.1 s; this one ticked at start and on
    # the signal, well before its tick of a second fell due.
    assert ticks == [0, 10]
    assert server.should_exit
    # A tick of uvicorn's counter is 0.1 s: a multiple of 10 refreshes the `date` header.
    assert all(counter % 10 == 0 for counter in ticks)
    assert any(name == b"date" for name, _ in server.server_state.default_headers)


async def test_without_a_signal_it_ticks_once_a_second() -> None:
    server, ticks = _server()
    server.config.load()
    loop = asyncio.get_running_loop()
    loop.call_later(TICK_SECONDS * 2.5, server.handle_exit, signal.SIGTERM, None)
    await asyncio.wait_for(server.main_loop(), timeout=10)
    assert ticks == [0, 10, 20, 30]
