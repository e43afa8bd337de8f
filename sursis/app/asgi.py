"""The app for process managers that import it (`sursis serve --workers N` starts one per process)."""

from __future__ import annotations

from litestar import Litestar

from sursis.app.allocator import return_freed_memory
from sursis.app.collector import settle_collector
from sursis.app.logging import configure_logging
from sursis.app.loop_thread import declare_asyncio
from sursis.app.main import create_app
from sursis.app.settings import Settings


def app_from_environment() -> Litestar:
    """`create_app` over the settings of the environment (each process reads them itself).
    uvicorn calls it on its loop's thread, which this process keeps for serving: that thread
    declares asyncio (`loop_thread`) for the rest of the process."""
    declare_asyncio()
    settings = Settings()
    configure_logging(settings.log_level, settings.log_json)
    return_freed_memory()
    app = create_app(settings)
    settle_collector()
    return app
