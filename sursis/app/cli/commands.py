"""The `sursis` command: serve, worker, migrate, wait-ready, keys, encryption, demo seed, retention,
audit verify (and `pending`).

The parser is built from light modules only and the arguments are parsed before the settings, the
logging or any command's libraries load: `sursis --help` or a mistyped option answers at once, and
each command imports what it uses (SQLAlchemy, Litestar, pydantic-ai) inside itself."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from sursis.app.allocator import return_freed_memory
from sursis.app.cli.encryption import add_encryption_commands, check_keyring
from sursis.app.cli.http import api_url, quiet_http_client
from sursis.app.cli.keys import add_key_commands, bootstrap_admin_key, command_line, with_storage
from sursis.app.cli.retention import add_commands
from sursis.app.collector import settle_collector
from sursis.app.otel_check import modules_to_check, unusable_opentelemetry
from sursis.domain.errors import ServiceError
from sursis.infra.db.readiness import DatabaseNotReady, require_head, require_location, shown_url
from sursis.infra.db.urls import InvalidDatabaseUrl, check_listen_url

if TYPE_CHECKING:
    from sursis.app.settings import Settings
    from sursis.app.storage import Storage
    from sursis.infra.db.encryption_state import EncryptionState


def _with_agents(settings: Settings, args: argparse.Namespace) -> tuple[Settings, str] | None:
    """The settings with the agents `--agents` names, loaded once here so that a name that cannot be
    loaded, or a model whose client library is missing, is one line and exit code 2 before anything
    starts (None then); with the banner's word on the models the served agents use."""
    from sursis.app.agent_loading import AgentLoadError, named_models, select_agents, served_models
    from sursis.app.model_check import models_banner, unusable_model
    from sursis.infra.runner.agents import may_repeat_tools

    if args.agents:
        settings = settings.model_copy(update={"agents": list(args.agents)})
        # Processes started from this one (--workers, --processes) read the environment.
        os.environ["SURSIS_AGENTS"] = ",".join(args.agents)
    try:
        selection = select_agents(settings.agents)
    except AgentLoadError as exc:
        print(f"sursis: {exc}", file=sys.stderr)
        return None
    for name in named_models(settings.model, selection):
        if (unusable := unusable_model(settings, name)) is not None:
            print(f"sursis: {unusable}", file=sys.stderr)
            return None
    models = served_models(settings.model, selection)
    served = [*sorted(selection.built_in), *(d.name for d in selection.definitions)]
    print(f"agents: {', '.join(served) or '(none)'}", flush=True)
    repeating = [name for d in selection.definitions for name in may_repeat_tools(d)]
    if repeating:
        # Declared `read` or idempotent: run again under the same call id after a crash.
        print(f"may repeat after a crash: {', '.join(repeating)}", flush=True)
    return settings, models_banner(models)


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from sursis.app.http_protocols import ProblemHttpToolsProtocol
    from sursis.app.main import create_app
    from sursis.app.processes import refuse_sqlite
    from sursis.app.quiet_server import serve
    from sursis.infra.db.engine import is_sqlite
    from sursis.infra.db.migrations import upgrade

    loaded = _with_agents(settings, args)
    if loaded is None:
        return 2
    settings, models = loaded
    if args.no_worker:
        settings = settings.model_copy(update={"run_worker": False})
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    if port == 0:
        port = _free_port(host)
    if args.workers > 1 and (refused := refuse_sqlite(settings.database_url, "serve --workers")):
        print(f"sursis: {refused}", file=sys.stderr)
        return 2
    require_location(settings.database_url)
    if settings.migrate_on_start and is_sqlite(settings.database_url):
        upgrade(settings.database_url)
    encryption = with_storage(settings, lambda storage: _start_state(storage, seals=settings.run_worker))
    bootstrap_admin_key(settings)
    print(f"Sursis API on http://{host}:{port}/v1  (OpenAPI docs: http://{host}:{port}/schema)", flush=True)
    print(
        f"database: {shown_url(settings.database_url)}  {models}  "
        f"worker: {'in-process' if settings.run_worker else 'off'}  processes: {args.workers}",
        flush=True,
    )
    print(encryption.describe(), flush=True)
    return_freed_memory()
    # Event streams never end by themselves: give them a few seconds, then close them on shutdown.
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_config": None,
        "access_log": False,
        "http": ProblemHttpToolsProtocol,
        "ws": "none",  # the API has no WebSocket route: the websockets library is not loaded
        "timeout_graceful_shutdown": 5,
    }
    if args.workers > 1:
        # Each process builds its own app from the environment; pass on what the flags changed.
        os.environ["SURSIS_RUN_WORKER"] = "true" if settings.run_worker else "false"
        uvicorn.run("sursis.app.asgi:app_from_environment", factory=True, workers=args.workers, **options)
    else:
        app = create_app(settings)
        settle_collector()
        if not serve(app, options):
            return STARTUP_FAILURE  # what `uvicorn.run` exits with when the server did not start
    return 0


def _free_port(host: str) -> int:
    """A port free on `host` now, for `--port 0`: chosen here so that the banner names it (uvicorn
    binds it right after, as a fixed port)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


async def _start_state(storage: Storage, *, seals: bool) -> EncryptionState:
    """What a starting process prints; refused (`AuditSigningKeyRequired`) when it would seal
    audit rows unsigned on a database with signed checkpoints."""
    if seals:
        await storage.audit_chain.require_signing()
    return storage.encryption


def run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run `main` on uvloop where it is installed, as uvicorn does for `serve`; otherwise on
    asyncio's own loop. A worker spends a share of each turn in the event loop itself."""
    import asyncio

    from sursis.app.loop_thread import asyncio_declared

    async def declared() -> None:
        with asyncio_declared():
            await main

    try:
        import uvloop
    except ImportError:
        asyncio.run(declared())
        return
    uvloop.run(declared())


def _worker(settings: Settings, args: argparse.Namespace) -> int:
    import asyncio

    from sursis.app.processes import refuse_sqlite, supervise
    from sursis.app.service import Service

    loaded = _with_agents(settings, args)
    if loaded is None:
        return 2
    settings, models = loaded
    print(models, flush=True)
    if args.processes > 1:
        if refused := refuse_sqlite(settings.database_url, "worker --processes"):
            print(f"sursis: {refused}", file=sys.stderr)
            return 2
        one = ["worker", *(["--concurrency", str(args.concurrency)] if args.concurrency else [])]
        return supervise(one, args.processes, grace=settings.shutdown_grace_seconds)
    if args.concurrency:
        settings = settings.model_copy(update={"worker_concurrency": args.concurrency})
    encryption = with_storage(settings, lambda storage: _start_state(storage, seals=True))
    print(f"worker: {shown_url(settings.database_url)}  {encryption.describe()}", flush=True)

    async def main() -> None:
        service = Service.from_settings(settings)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await service.start(run_worker=True)
        settle_collector()
        await stop.wait()
        await service.close()

    return_freed_memory()
    run_event_loop(main())
    return 0


def _at_head(url: str, current: Any, head: Any) -> bool:
    """Whether the database is at the migrations' head; an unreachable one is left to Alembic, whose
    error `migrate` reports."""
    import asyncio

    from sursis.infra.db.readiness import DatabaseNotReady

    try:
        return bool(asyncio.run(current(url)) == head())
    except DatabaseNotReady:
        return False


def _migrate(settings: Settings, _: argparse.Namespace) -> int:
    from sursis.infra.db.readiness import current_revision, head_revision

    require_location(settings.database_url)
    # A database at the head (what a deploy meets before almost every start) is only read: Alembic,
    # its script directory and every migration script are not loaded for it, nor SQLAlchemy for a
    # plain URL (an SQLite file, one PostgreSQL host without options: `readiness.current_revision`).
    if _at_head(settings.database_url, current_revision, head_revision):
        print(f"migrated {shown_url(settings.database_url)} to head")
        return 0
    from sqlalchemy import exc

    from sursis.infra.db.migrations import upgrade

    try:
        upgrade(settings.database_url)
    except (OSError, exc.DBAPIError) as error:
        reason = str(getattr(error, "orig", None) or error).splitlines()[0][:200]
        print(f"sursis: cannot migrate {shown_url(settings.database_url)}: {reason}", file=sys.stderr)
        return 2
    print(f"migrated {shown_url(settings.database_url)} to head")
    return 0


def _db_check(settings: Settings, _: argparse.Namespace) -> int:
    import asyncio

    asyncio.run(require_head(settings.database_url))
    print(f"ok: {shown_url(settings.database_url)} is at the migrations' head")
    return 0


def _wait_ready(settings: Settings, args: argparse.Namespace) -> int:
    import time

    import httpx

    quiet_http_client()
    base = (args.url or api_url(settings)).rstrip("/")
    deadline = time.monotonic() + args.timeout
    last = "no answer"
    while True:
        try:
            answer = httpx.get(f"{base}/readyz", timeout=2)
            if answer.status_code == 200:
                print(f"ready: {base}", flush=True)
                return 0
            last = f"HTTP {answer.status_code}"
        except httpx.HTTPError as error:
            last = type(error).__name__
        if time.monotonic() >= deadline:
            print(f"sursis: {base} not ready after {args.timeout:g}s ({last})", file=sys.stderr)
            return 1
        time.sleep(0.5)


def _demo_seed(settings: Settings, args: argparse.Namespace) -> int:
    from sursis.domain.clock import utcnow
    from sursis.domain.identity.keys import WORKSPACE
    from sursis.infra.db.migrations import upgrade
    from sursis.infra.demo import demo_event_ids, seed_demo

    if not WORKSPACE.match(args.workspace):
        print("a workspace is 1-100 characters of letters, digits, '_', '.' or '-'", file=sys.stderr)
        return 2
    upgrade(settings.database_url)
    added = with_storage(settings, lambda storage: seed_demo(storage.uow, args.workspace, utcnow()))
    print(f"seeded {added} dead letters in workspace {args.workspace!r}")
    print(f"dead letters: {' '.join(demo_event_ids(args.workspace))}")
    return 0


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def _agents_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--agents",
        action="append",
        metavar="NAME",
        help="agents to serve, repeatable: package.module:NAME, an entry point of `sursis.agents`, "
        "or a built-in (ops, assistant, customer, world); default: SURSIS_AGENTS, else the built-in "
        "agents and every installed one",
    )


def _login(settings: Settings, args: argparse.Namespace) -> int:
    from sursis.app.cli.login import login

    return login(settings, args)


def parser() -> argparse.ArgumentParser:
    from importlib.metadata import version

    from sursis.app.cli.conversations import add_conversation_commands
    from sursis.app.cli.mcp import add_mcp_commands
    from sursis.app.cli.pending import add_pending_commands
    from sursis.app.cli.policy import add_policy_commands

    p = argparse.ArgumentParser(prog="sursis", description="Agents whose tool calls wait for a human.")
    p.add_argument("--version", action="version", version=f"sursis {version('sursis')}")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP API (and, by default, a worker in-process)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int, help="0: a free port, printed at start")
    serve.add_argument("--no-worker", action="store_true", help="API only; run `sursis worker` separately")
    serve.add_argument(
        "--workers", type=_positive, default=1, help="API processes on the port (PostgreSQL only when > 1)"
    )
    _agents_option(serve)
    serve.set_defaults(func=_serve)
    worker = sub.add_parser("worker", help="run a worker against the database")
    worker.add_argument("--concurrency", type=_positive, help="segments each process runs at once")
    worker.add_argument(
        "--processes", type=_positive, default=1, help="worker processes to start (PostgreSQL only when > 1)"
    )
    _agents_option(worker)
    worker.set_defaults(func=_worker)
    migrate = sub.add_parser("migrate", help="apply the database migrations")
    migrate.set_defaults(func=_migrate)
    check = sub.add_parser("db-check", help="exit 0 if the database is reachable and migrated, else 2")
    check.set_defaults(func=_db_check)
    ready = sub.add_parser("wait-ready", help="wait until the API answers /readyz (exit 1 on timeout)")
    ready.add_argument("--url", help="the API's base URL (default: SURSIS_API_URL, else http://HOST:PORT)")
    ready.add_argument("--timeout", type=float, default=120.0, help="seconds (default 120)")
    ready.set_defaults(func=_wait_ready)
    add_pending_commands(sub)
    login = sub.add_parser("login", help="sign in with the identity provider (device flow)")
    login.set_defaults(func=_login)
    add_policy_commands(sub)
    add_mcp_commands(sub)
    add_key_commands(sub)
    add_conversation_commands(sub)
    add_encryption_commands(sub)
    demo = sub.add_parser("demo", help="demo data")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True)
    seed = demo_sub.add_parser("seed", help="insert a few dead letters and failure clusters")
    seed.add_argument("--workspace", default="default")
    seed.set_defaults(func=_demo_seed)
    add_commands(sub, command_line)
    return p


def run(argv: list[str], settings: Settings) -> int:
    """Parse and run one command; a refused request (bad role, unknown key) exits with 2."""
    return _run_parsed(parser().parse_args(argv), settings)


def _run_parsed(args: argparse.Namespace, settings: Settings) -> int:
    if args.command in ("serve", "worker", "migrate") and (
        unusable := unusable_opentelemetry(modules_to_check(args.command, exporting=_exporting(settings)))
    ):
        print(f"sursis: {unusable}", file=sys.stderr)
        return 2
    try:
        if args.command in ("serve", "worker"):
            check_keyring(settings)  # a malformed keyring stops the start here, not in each process
            check_listen_url(settings.database_url, settings.database_listen_url)
        return int(args.func(settings, args))
    except ServiceError as exc:
        print(f"sursis: {exc.message}", file=sys.stderr)
        return 2
    except (DatabaseNotReady, InvalidDatabaseUrl) as exc:
        print(f"sursis: {exc}", file=sys.stderr)
        return 2


def _exporting(settings: Settings) -> bool:
    """Whether an OTLP endpoint is configured (the exporters load only then)."""
    return any((settings.otlp_endpoint, settings.otlp_traces_endpoint, settings.otlp_metrics_endpoint))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    from pydantic import ValidationError

    from sursis.app.logging import configure_logging
    from sursis.app.settings import Settings

    try:
        settings = Settings()
    except ValidationError as exc:
        # One line per setting that is wrong, naming it; never the value (it may be a secret).
        for error in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(p) for p in error["loc"])
            name, _, inner = where.partition(".")
            shown = f"SURSIS_{name.upper()}" + (f" ({inner})" if inner else "")
            print(f"sursis: invalid setting {shown}: {error['msg']}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_json)
    return _run_parsed(args, settings)
