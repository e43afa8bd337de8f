"""The `sursis` command: serve, worker, migrate, keys, encryption, demo seed."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from sursis.app.cli_encryption import add_encryption_commands, check_keyring
from sursis.app.logging import configure_logging
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.errors import ServiceError
from sursis.domain.keys import WORKSPACE, IssuedKey, KeyService
from sursis.domain.records import Principal

T = TypeVar("T")

COMMAND_LINE = Principal(id="cli", role=Role.ADMIN, workspace=None, name="command line")
"""Whoever can run the command against the database administers it; audited as `cli`."""


def _with_keys(settings: Settings, use: Callable[[KeyService], Awaitable[T]]) -> T:
    from sursis.infra.db.engine import create_engine
    from sursis.infra.db.uow import SqlUnitOfWorkFactory

    async def main() -> T:
        engine = create_engine(settings.database_url)
        try:
            return await use(KeyService(SqlUnitOfWorkFactory(engine)))
        finally:
            await engine.dispose()

    return asyncio.run(main())


def _print_new_key(issued: IssuedKey, headline: str) -> None:
    key = issued.key
    print(headline)
    print(f"  {issued.secret}")
    print(f"  id {key.id}  role {key.role.value}  workspace {key.workspace or '(all)'}  name {key.name!r}")
    print("Store it now: it is shown only this once (only its hash is kept).", flush=True)


def bootstrap_admin_key(settings: Settings) -> IssuedKey | None:
    """On a database with no keys at all, make one admin key and print it; otherwise nothing."""
    issued = _with_keys(settings, lambda keys: keys.create_first_admin(COMMAND_LINE))
    if issued is not None:
        _print_new_key(issued, "No API keys yet; made the first admin key:")
    return issued


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from sursis.app.http_protocols import ProblemHttpToolsProtocol
    from sursis.app.main import create_app
    from sursis.app.processes import refuse_sqlite
    from sursis.infra.db.engine import is_sqlite
    from sursis.infra.db.migrations import upgrade

    if args.no_worker:
        settings = settings.model_copy(update={"run_worker": False})
    host = args.host or settings.host
    port = args.port or settings.port
    if args.workers > 1 and (refused := refuse_sqlite(settings.database_url, "serve --workers")):
        print(f"sursis: {refused}", file=sys.stderr)
        return 2
    if settings.migrate_on_start and is_sqlite(settings.database_url):
        upgrade(settings.database_url)
    bootstrap_admin_key(settings)
    print(f"Sursis API on http://{host}:{port}/v1  (OpenAPI docs: http://{host}:{port}/schema)", flush=True)
    print(
        f"database: {settings.database_url}  model: {settings.model}  "
        f"worker: {'in-process' if settings.run_worker else 'off'}  processes: {args.workers}",
        flush=True,
    )
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

    if args.processes > 1:
        if refused := refuse_sqlite(settings.database_url, "worker --processes"):
            print(f"sursis: {refused}", file=sys.stderr)
            return 2
        one = ["worker", *(["--concurrency", str(args.concurrency)] if args.concurrency else [])]
        return supervise(one, args.processes, grace=settings.shutdown_grace_seconds)
    if args.concurrency:
        settings = settings.model_copy(update={"worker_concurrency": args.concurrency})

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
    from sursis.infra.db.migrations import upgrade

    upgrade(settings.database_url)
    print(f"migrated {settings.database_url} to head")
    return 0


def _demo_seed(settings: Settings, args: argparse.Namespace) -> int:
    from sursis.domain.clock import utcnow
    from sursis.infra.db.engine import create_engine
    from sursis.infra.db.migrations import upgrade
    from sursis.infra.db.uow import SqlUnitOfWorkFactory
    from sursis.infra.demo import demo_event_ids, seed_demo

    if not WORKSPACE.match(args.workspace):
        print("a workspace is 1-100 characters of letters, digits, '_', '.' or '-'", file=sys.stderr)
        return 2
    upgrade(settings.database_url)

    async def main() -> int:
        engine = create_engine(settings.database_url)
        try:
            return await seed_demo(SqlUnitOfWorkFactory(engine), args.workspace, utcnow())
        finally:
            await engine.dispose()

    added = asyncio.run(main())
    print(f"seeded {added} dead letters in workspace {args.workspace!r}")
    print(f"dead letters: {' '.join(demo_event_ids(args.workspace))}")
    return 0


def _keys_create(settings: Settings, args: argparse.Namespace) -> int:
    issued = _with_keys(
        settings,
        lambda keys: keys.create(COMMAND_LINE, role=args.role, workspace=args.workspace, name=args.name),
    )
    _print_new_key(issued, "New API key:")
    return 0


def _keys_list(settings: Settings, args: argparse.Namespace) -> int:
    found = _with_keys(settings, lambda keys: keys.list_keys(COMMAND_LINE, include_revoked=args.all))
    print(f"{'id':36}  {'prefix':12}  {'role':8}  {'workspace':16}  {'created':20}  {'revoked':20}  name")
    for key in found:
        print(
            f"{key.id!s:36}  {key.prefix:12}  {key.role.value:8}  {key.workspace or '(all)':16}  "
            f"{key.created_at:%Y-%m-%d %H:%M:%S}Z  "
            f"{f'{key.revoked_at:%Y-%m-%d %H:%M:%S}Z' if key.revoked_at else '-':20}  {key.name}"
        )
    return 0


def _keys_revoke(settings: Settings, args: argparse.Namespace) -> int:
    key = _with_keys(settings, lambda keys: keys.revoke(COMMAND_LINE, args.key_id))
    print(f"revoked {key.id} ({key.name}, {key.role.value})")
    return 0


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sursis", description="Agents whose tool calls wait for a human.")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP API (and, by default, a worker in-process)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--no-worker", action="store_true", help="API only; run `sursis worker` separately")
    serve.add_argument(
        "--workers", type=_positive, default=1, help="API processes on the port (PostgreSQL only when > 1)"
    )
    serve.set_defaults(func=_serve)
    worker = sub.add_parser("worker", help="run a worker against the database")
    worker.add_argument("--concurrency", type=_positive, help="segments each process runs at once")
    worker.add_argument(
        "--processes", type=_positive, default=1, help="worker processes to start (PostgreSQL only when > 1)"
    )
    worker.set_defaults(func=_worker)
    migrate = sub.add_parser("migrate", help="apply the database migrations")
    migrate.set_defaults(func=_migrate)
    keys = sub.add_parser("keys", help="API keys: create, list, revoke")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="make a key and print it once")
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--workspace", help="required for user and operator keys; admins see every workspace")
    create.add_argument("--name", help="a label for listings and the audit log")
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
    return p


def run(argv: list[str], settings: Settings) -> int:
    """Parse and run one command; a refused request (bad role, unknown key) exits with 2."""
    args = parser().parse_args(argv)
    try:
        if args.command in ("serve", "worker"):
            check_keyring(settings)  # a malformed keyring stops the start here, not in each process
        return int(args.func(settings, args))
    except ServiceError as exc:
        print(f"sursis: {exc.message}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    settings = Settings()
    configure_logging(settings.log_level, settings.log_json)
    return run(sys.argv[1:] if argv is None else argv, settings)


if __name__ == "__main__":
    sys.exit(main())
