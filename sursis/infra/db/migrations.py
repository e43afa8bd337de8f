"""Run the Alembic migrations programmatically (the CLI and the tests go through here)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

SCRIPT_LOCATION = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str) -> Config:
    """The migrations ship inside the package, so an installed wheel migrates with nothing else on disk.

    Alembic is imported when a migration runs, not with the app: it and Mako cost a process that
    never migrates (a worker, an API with `SURSIS_MIGRATE_ON_START=false`) several MiB.
    """
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = url
    return config


def _outside_loop(fn: Callable[[], None]) -> None:
    """Alembic's async env starts its own event loop, which needs a thread without one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        fn()
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(fn).result()


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    _outside_loop(lambda: command.upgrade(alembic_config(url), revision))


def downgrade(url: str, revision: str) -> None:
    from alembic import command

    _outside_loop(lambda: command.downgrade(alembic_config(url), revision))


async def upgrade_async(url: str, revision: str = "head") -> None:
    """From inside a running event loop: Alembic's async env starts its own loop, so use a thread."""
    await asyncio.to_thread(upgrade, url, revision)
