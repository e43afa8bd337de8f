"""The `sursis` command: serve, worker, migrate, wait-ready, keys, encryption, demo seed, retention,
audit verify (and `pending`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sursis.app.cli_encryption import add_encryption_commands, check_keyring
from sursis.app.cli_retention import add_commands
from sursis.app.logging import configure_logging
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.errors import ServiceError
from sursis.domain.keys import WORKSPACE, IssuedKey, KeyService
from sursis.domain.records import Principal
from sursis.infra.db.readiness import DatabaseNotReady, require_head, require_location, shown_url
from sursis.infra.db.urls import InvalidDatabaseUrl, check_listen_url

if TYPE_CHECKING:
    from sursis.app.storage import Storage
    from sursis.infra.db.encryption_state import EncryptionState

T = TypeVar("T")

COMMAND_LINE = Principal(id="cli", role=Role.ADMIN, workspace=None, name="command line")
"""Whoever can run the command against the database administers it; audited as `cli`."""


def with_storage(settings: Settings, use: Callable[[Storage], Awaitable[T]]) -> T:
    """`sursis.app.storage.with_storage`, imported when a command needs the database (the command
    line loads SQLAlchemy only then)."""
    from sursis.app.storage import with_storage as run_with_storage

    return run_with_storage(settings, use)


def _with_keys(settings: Settings, use: Callable[[KeyService], Awaitable[T]]) -> T:
    return with_storage(settings, lambda storage: use(storage.keys))


def _print_new_key(issued: IssuedKey, headline: str) -> None:
    key = issued.key
    print(headline)
    print(f"  {issued.secret}")
    print(f"  id {key.id}  role {key.role.value}  workspace {key.workspace or '(all)'}  name {key.name!r}")
    print("Store it now: it is shown only this once (only its hash is kept).", flush=True)


def _write_key_file(path: str, issued: IssuedKey) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(issued.secret + "\n")


def bootstrap_admin_key(settings: Settings, *, on_terminal: bool | None = None) -> IssuedKey | None:
    """On a database with no keys at all, make one admin key; otherwise nothing.

    The key is shown only on a terminal, or written (mode 0600) to `settings.admin_key_file`:
    standard output of a container or a service manager ends up in logs, where no key belongs.
    Elsewhere no key is made and a line says how to make one.
    """
    if on_terminal is None:
        on_terminal = sys.stdout.isatty()
    key_file = settings.admin_key_file
    if not on_terminal and not key_file:

        async def count_keys(keys: KeyService) -> int:
            return len(await keys.list_keys(COMMAND_LINE, include_revoked=True))

        if _with_keys(settings, count_keys) == 0:
            print(
                "No API keys yet: make one with `sursis keys create --role admin`, "
                "or set SURSIS_ADMIN_KEY_FILE to have `serve` write the first one there.",
                flush=True,
            )
        return None
    issued = _with_keys(settings, lambda keys: keys.create_first_admin(COMMAND_LINE))
    if issued is None:
        return None
    if key_file:
        _write_key_file(key_file, issued)
        print(f"No API keys yet; wrote the first admin key to {key_file} (mode 0600).", flush=True)
    else:
        _print_new_key(issued, "No API keys yet; made the first admin key:")
    return issued


def _with_agents(settings: Settings, args: argparse.Namespace) -> tuple[Settings, str] | None:
    """The settings with the agents `--agents` names, loaded once here so that a name that cannot be
    loaded, or a model whose client library is missing, is one line and exit code 2 before anything
    starts (None then); with the banner's word on the models the served agents use."""
    from sursis.app.agent_loading import AgentLoadError, named_models, select_agents, served_models
    from sursis.app.model_check import models_banner, unusable_model

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
    return settings, models_banner(models)


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from sursis.app.http_protocols import ProblemHttpToolsProtocol
    from sursis.app.main import create_app
    from sursis.app.processes import refuse_sqlite
    from sursis.infra.db.engine import is_sqlite
    from sursis.infra.db.migrations import upgrade

    loaded = _with_agents(settings, args)
    if loaded is None:
        return 2
    settings, models = loaded
    if args.no_worker:
        settings = settings.model_copy(update={"run_worker": False})
    host = args.host or settings.host
    port = args.port or settings.port
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
    # Event streams never end by themselves: give them a few seconds, then close them on shutdown.
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_config": None,
        "access_log": False,
        "http": ProblemHttpToolsProtocol,
        "timeout_graceful_shutdown": 5,
    }
    if args.workers > 1:
        # Each process builds its own app from the environment; pass on what the flags changed.
        os.environ["SURSIS_RUN_WORKER"] = "true" if settings.run_worker else "false"
        uvicorn.run("sursis.app.asgi:app_from_environment", factory=True, workers=args.workers, **options)
    else:
        uvicorn.run(create_app(settings), **options)
    return 0


async def _start_state(storage: Storage, *, seals: bool) -> EncryptionState:
    """What a starting process prints; refused (`AuditSigningKeyRequired`) when it would seal
    audit rows unsigned on a database with signed checkpoints."""
    if seals:
        await storage.audit_chain.require_signing()
    return storage.encryption


def run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run `main` on uvloop where it is installed, as uvicorn does for `serve`; otherwise on
    asyncio's own loop. A worker spends a share of each turn in the event loop itself."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


def _worker(settings: Settings, args: argparse.Namespace) -> int:
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
        await stop.wait()
        await service.close()

    run_event_loop(main())
    return 0


def _migrate(settings: Settings, _: argparse.Namespace) -> int:
    from sqlalchemy import exc

    from sursis.infra.db.migrations import upgrade

    require_location(settings.database_url)
    try:
        upgrade(settings.database_url)
    except (OSError, exc.DBAPIError) as error:
        reason = str(getattr(error, "orig", None) or error).splitlines()[0][:200]
        print(f"sursis: cannot migrate {shown_url(settings.database_url)}: {reason}", file=sys.stderr)
        return 2
    print(f"migrated {shown_url(settings.database_url)} to head")
    return 0


def _db_check(settings: Settings, _: argparse.Namespace) -> int:
    asyncio.run(require_head(settings.database_url))
    print(f"ok: {shown_url(settings.database_url)} is at the migrations' head")
    return 0


def _wait_ready(settings: Settings, args: argparse.Namespace) -> int:
    import time

    import httpx

    from sursis.app.cli_pending import quiet_http_client

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


def api_url(settings: Settings) -> str:
    """Where the command-line client finds the API: `SURSIS_API_URL`, else `serve`'s host and port."""
    if settings.api_url:
        return settings.api_url
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{host}:{settings.port}"


def _demo_seed(settings: Settings, args: argparse.Namespace) -> int:
    from sursis.domain.clock import utcnow
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


def _keys_create(settings: Settings, args: argparse.Namespace) -> int:
    issued = _with_keys(
        settings,
        lambda keys: keys.create(
            COMMAND_LINE, role=args.role, workspace=args.workspace, name=args.name, expires_at=args.expires_at
        ),
    )
    _print_new_key(issued, "New API key:")
    return 0


def _keys_list(settings: Settings, args: argparse.Namespace) -> int:
    found = _with_keys(settings, lambda keys: keys.list_keys(COMMAND_LINE, include_revoked=args.all))
    print(
        f"{'id':36}  {'prefix':12}  {'role':8}  {'workspace':16}  {'created':20}  {'revoked':20}  "
        f"{'expires':20}  name"
    )
    for key in found:
        print(
            f"{key.id!s:36}  {key.prefix:12}  {key.role.value:8}  {key.workspace or '(all)':16}  "
            f"{key.created_at:%Y-%m-%d %H:%M:%S}Z  {_moment(key.revoked_at):20}  "
            f"{_moment(key.expires_at):20}  {key.name}"
        )
    return 0


def _keys_revoke(settings: Settings, args: argparse.Namespace) -> int:
    key = _with_keys(settings, lambda keys: keys.revoke(COMMAND_LINE, args.key_id))
    print(f"revoked {key.id} ({key.name}, {key.role.value})")
    return 0


def _moment(at: datetime | None) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z" if at is not None else "-"


def _aware_moment(value: str) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError("an ISO 8601 moment, e.g. 2027-01-31T18:00:00Z") from None
    if at.tzinfo is None:
        raise argparse.ArgumentTypeError("give the time zone too, e.g. 2027-01-31T18:00:00Z")
    return at


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


def parser() -> argparse.ArgumentParser:
    from importlib.metadata import version

    from sursis.app.cli_conversations import add_conversation_commands
    from sursis.app.cli_mcp import add_mcp_commands
    from sursis.app.cli_pending import add_pending_commands
    from sursis.app.cli_policy import add_policy_commands

    p = argparse.ArgumentParser(prog="sursis", description="Agents whose tool calls wait for a human.")
    p.add_argument("--version", action="version", version=f"sursis {version('sursis')}")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP API (and, by default, a worker in-process)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
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
    add_policy_commands(sub)
    add_mcp_commands(sub)
    add_conversation_commands(sub)
    keys = sub.add_parser("keys", help="API keys: create, list, revoke")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="make a key and print it once")
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--workspace", help="required for user and operator keys; admins see every workspace")
    create.add_argument("--name", help="a label for listings and the audit log")
    create.add_argument(
        "--expires-at", type=_aware_moment, help="refuse the key from then on (ISO 8601, with its zone)"
    )
    create.set_defaults(func=_keys_create)
    listing = keys_sub.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--all", action="store_true", help="include revoked keys")
    listing.set_defaults(func=_keys_list)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id", type=uuid.UUID)
    revoke.set_defaults(func=_keys_revoke)
    add_encryption_commands(sub)
    demo = sub.add_parser("demo", help="demo data")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True)
    seed = demo_sub.add_parser("seed", help="insert a few dead letters and failure clusters")
    seed.add_argument("--workspace", default="default")
    seed.set_defaults(func=_demo_seed)
    add_commands(sub, COMMAND_LINE)
    return p


def run(argv: list[str], settings: Settings) -> int:
    """Parse and run one command; a refused request (bad role, unknown key) exits with 2."""
    args = parser().parse_args(argv)
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


def main(argv: list[str] | None = None) -> int:
    settings = Settings()
    configure_logging(settings.log_level, settings.log_json)
    return run(sys.argv[1:] if argv is None else argv, settings)


if __name__ == "__main__":
    sys.exit(main())
