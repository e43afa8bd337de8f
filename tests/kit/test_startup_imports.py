"""A process loads a feature's libraries only when the feature is configured: building the app and
the service without Slack or encryption keys imports neither the Slack SDK, aiohttp nor
cryptography (about 17 MiB of resident memory in each process, see docs/performance.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

OPTIONAL = ("aiohttp", "slack_sdk", "cryptography")
BUILD = (
    "import sys\n"
    "from sursis.app.main import create_app\n"
    "from sursis.app.service import Service\n"
    "from sursis.app.settings import Settings\n"
    "settings = Settings()\n"
    "create_app(settings)\n"
    "Service.from_settings(settings)\n"
    f"print(' '.join(m for m in {OPTIONAL!r} if m in sys.modules))\n"
)


def loaded_after_start_up(tmp_path: Path, **settings: str) -> set[str]:
    """The optional libraries in `sys.modules` once a fresh interpreter has built the app and the
    service (with its worker's loops) from these `SURSIS_*` settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env["SURSIS_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    env.update({f"SURSIS_{name.upper()}": value for name, value in settings.items()})
    done = subprocess.run(
        [sys.executable, "-c", BUILD], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_serving_without_slack_or_keys_loads_none_of_their_libraries(tmp_path: Path) -> None:
    assert loaded_after_start_up(tmp_path) == set()


def test_a_configured_slack_channel_loads_its_client_at_start_up(tmp_path: Path) -> None:
    """The Slack deliverer is one of the worker's loops, built with the service: the check above
    would see the libraries if they were loaded."""
    assert loaded_after_start_up(tmp_path, slack_bot_token="xoxb-test") == {"aiohttp", "slack_sdk"}


def test_checking_the_database_is_at_the_head_loads_no_alembic(tmp_path: Path) -> None:
    """`serve` and `worker` check the revision before starting: Alembic, Mako and the migration
    scripts (about 9 MiB) load only where migrations run."""
    from sursis.infra.db.migrations import upgrade

    url = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    upgrade(url)
    check = (
        "import asyncio, sys\n"
        "from sursis.infra.db.readiness import require_head\n"
        f"asyncio.run(require_head({url!r}))\n"
        "print(' '.join(m for m in ('alembic', 'mako') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []
