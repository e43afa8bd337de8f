"""No request waits for a thread: Litestar runs a plain-function guard, dependency or handler in its
thread pool, a hop (and a context switch) on every request that goes through it."""

from __future__ import annotations

from typing import Any

from litestar.utils.sync import AsyncCallable

from sursis.app.main import create_app
from tests.conftest import make_settings


def test_every_guard_dependency_and_handler_runs_on_the_event_loop(seeded: str) -> None:
    app = create_app(make_settings(seeded))
    handlers: list[Any] = [h for route in app.routes for h in getattr(route, "route_handlers", ())]
    assert len(handlers) > 50, "the app's routes were found"
    in_threads: list[str] = []
    for handler in handlers:
        name = f"{handler.handler_name} {sorted(handler.paths)}"
        in_threads += [
            f"{name}: guard {g.func!r}" for g in handler.resolve_guards() if isinstance(g, AsyncCallable)
        ]
        in_threads += [
            f"{name}: dependency {key}"
            for key, provider in handler.resolve_dependencies().items()
            if provider.has_sync_callable and provider.sync_to_thread
        ]
        if handler.has_sync_callable and handler.sync_to_thread:
            in_threads.append(f"{name}: handler")
    assert in_threads == []
