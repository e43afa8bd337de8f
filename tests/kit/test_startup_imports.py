"""A process loads a feature's libraries only when the feature is configured: building the app and
the service without Slack or encryption keys imports neither the Slack SDK, aiohttp nor
cryptography (about 17 MiB of resident memory in each process, see docs/performance-history.md); a
process serving only its own agents loads neither the World Agent, the customer agents, the
channel senders nor Cedar (until a policy has a condition), and no process loads Rich or Pygments
for structlog's console or httpx's command line, nor AG-UI's types before its first run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

OPTIONAL = ("aiohttp", "slack_sdk", "cryptography")
SERVED_ONLY = (
    "sursis.infra.worlds.agent",
    "sursis.infra.worlds.corpus",
    "sursis.infra.worlds.memory",
    "sursis.infra.worlds.memory_tools",
    "sursis.infra.worlds.runner",
    "sursis.infra.worlds.sandbox",
    "sursis.infra.customer.supervisor",
    "sursis.infra.customer.specialists",
    "sursis.infra.customer.delegation",
    "sursis.infra.customer.demo",
    "sursis.infra.channels.slack_delivery",
    "sursis.infra.channels.email_digest",
    "aiosmtplib",
    "cedarpy",
    "rich",
    "pygments",
    "ag_ui.core",
    "sursis.app.ag_ui",
)
PLAIN_AGENT = (
    "from pydantic_ai import Agent\n"
    "agent = Agent('test', name='plain', instructions='Be brief.')\n"
    "@agent.tool_plain\n"
    "def lookup(order: str) -> str:\n"
    "    return order\n"
)
BUILD = (
    "import sys\n"
    "from sursis.app.main import create_app\n"
    "from sursis.app.service import Service\n"
    "from sursis.app.settings import Settings\n"
    "settings = Settings()\n"
    "create_app(settings)\n"
    "Service.from_settings(settings)\n"
    "print(' '.join(m for m in sys.argv[1:] if m in sys.modules))\n"
)


def loaded_after_start_up(
    tmp_path: Path, watched: tuple[str, ...] = (*OPTIONAL, *SERVED_ONLY), **settings: str
) -> set[str]:
    """The `watched` modules in `sys.modules` once a fresh interpreter has built the app and the
    service (with its worker's loops) from these `SURSIS_*` settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env["SURSIS_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    env.update({f"SURSIS_{name.upper()}": value for name, value in settings.items()})
    done = subprocess.run(
        [sys.executable, "-c", BUILD, *watched],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_serving_without_slack_or_keys_loads_none_of_their_libraries(tmp_path: Path) -> None:
    """The built-in agents: the World Agent and the customer agents load, channels and Cedar do not."""
    assert loaded_after_start_up(tmp_path) == {
        "sursis.infra.worlds.agent",
        "sursis.infra.worlds.corpus",
        "sursis.infra.worlds.memory",
        "sursis.infra.worlds.memory_tools",
        "sursis.infra.worlds.runner",
        "sursis.infra.worlds.sandbox",
        "sursis.infra.customer.supervisor",
        "sursis.infra.customer.specialists",
        "sursis.infra.customer.delegation",
    }


def test_serving_only_an_adopted_agent_loads_no_built_in_context(tmp_path: Path) -> None:
    """`--agents plain_agent:agent`: the World Agent, the customer agents, the channels' senders,
    Cedar, Rich and Pygments stay out of the process."""
    (tmp_path / "plain_agent.py").write_text(PLAIN_AGENT)
    assert loaded_after_start_up(tmp_path, agents="plain_agent:agent") == set()


def test_a_configured_slack_channel_loads_its_client_at_start_up(tmp_path: Path) -> None:
    """The Slack deliverer is one of the worker's loops, built with the service: the check above
    would see the libraries if they were loaded."""
    loaded = loaded_after_start_up(tmp_path, agents="assistant", slack_bot_token="xoxb-test")
    assert loaded == {"aiohttp", "slack_sdk", "sursis.infra.channels.slack_delivery"}


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


COMMAND_LINE = (
    "import atexit, sys\n"
    "watched = {watched!r}\n"
    "atexit.register(lambda: print('LOADED', *sorted(m for m in watched if m in sys.modules)))\n"
    "from sursis.app.cli import main\n"
    "sys.exit(main({argv!r}))\n"
)


def loaded_by_command(
    tmp_path: Path, argv: list[str], watched: tuple[str, ...], **env_extra: str
) -> set[str]:
    """Which of `watched` a fresh `sursis ARGV` has imported when it exits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SURSIS_", "OTEL_"))}
    env["SURSIS_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    env.update(env_extra)
    done = subprocess.run(
        [sys.executable, "-c", COMMAND_LINE.format(watched=watched, argv=argv)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    [line] = [line for line in done.stdout.splitlines() if line.startswith("LOADED")]
    return set(line.split()[1:])


SERVING_LIBRARIES = (
    "sqlalchemy",
    "alembic",
    "asyncpg",
    "pydantic",
    "pydantic_settings",
    "pydantic_ai",
    "litestar",
    "uvicorn",
    "httpx",
    "structlog",
    "opentelemetry",
    "google.protobuf",
    "pygments",
    "rich",
)


def test_help_loads_no_library_a_command_uses(tmp_path: Path) -> None:
    """`sursis --help` (and a mistyped command) parse with argparse alone: the settings, the
    logging and each command's libraries (asyncio too) load inside the command that runs."""
    watched = (*SERVING_LIBRARIES, "asyncio")
    assert loaded_by_command(tmp_path, ["--help"], watched) == set()
    assert loaded_by_command(tmp_path, ["no-such-command"], watched) == set()


def test_migrate_loads_neither_the_http_stack_nor_the_agents(tmp_path: Path) -> None:
    """`sursis migrate` loads the settings, SQLAlchemy, Alembic and OpenTelemetry's own modules (its
    check of the installed releases), not Litestar, pydantic-ai, httpx, the OTLP exporters' protobuf,
    nor Pygments (which Mako's error templates would load)."""
    loaded = loaded_by_command(tmp_path, ["migrate"], SERVING_LIBRARIES)
    assert loaded == {
        "sqlalchemy",
        "alembic",
        "asyncpg",
        "pydantic",
        "pydantic_settings",
        "opentelemetry",
        "structlog",
    }


def test_serve_loads_the_otlp_exporters_only_with_an_endpoint(tmp_path: Path) -> None:
    """`serve` checks the OpenTelemetry modules it loads before starting: the OTLP exporters (and
    protobuf) only when an OTLP endpoint is configured. (An agent that cannot be loaded stops the
    start right after the check.)"""
    argv = ["serve", "--agents", "no_such_module:agent"]
    watched = ("google.protobuf", "opentelemetry.exporter.otlp.proto.http.trace_exporter", "litestar")
    assert loaded_by_command(tmp_path, argv, watched) == {"litestar"}
    exporting = loaded_by_command(tmp_path, argv, watched, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert exporting == set(watched)


MIGRATE_TWICE = (
    "import sys\n"
    "from sursis.app.cli import main\n"
    "code = main(['migrate'])\n"
    "print(code, ' '.join(m for m in ('alembic', 'mako', 'sursis.domain.identity') if m in sys.modules))\n"
)


def test_migrate_on_a_database_at_the_head_only_reads_its_revision(tmp_path: Path) -> None:
    """What a deploy runs before each start: the first `migrate` applies the scripts through
    Alembic; the next finds the database at the head and loads neither Alembic, Mako nor the
    identity context (the OIDC groups setting is empty), and prints the same line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env["SURSIS_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    runs = [
        subprocess.run(
            [sys.executable, "-c", MIGRATE_TWICE],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        for _ in range(2)
    ]
    first, second = runs
    assert first[0].startswith("migrated ") and first[0].endswith(" to head")
    assert first[1].split() == ["0", "alembic", "mako"]
    assert second == [first[0], "0 "]


def test_serving_on_postgresql_loads_no_sqlite(tmp_path: Path) -> None:
    """The watch of an SQLite file's `data_version` and `sqlite3` (about 1 MiB) load only where the
    database is an SQLite file; building the app and the service touches no database."""
    watched = ("sqlite3", "sursis.infra.db.sqlite_watch")
    on_postgresql = "postgresql+asyncpg://postgres@127.0.0.1:9/none"
    assert loaded_after_start_up(tmp_path, watched, database_url=on_postgresql, agents="assistant") == set()
    assert loaded_after_start_up(tmp_path, watched, agents="assistant") == set(watched)
