"""The `abeyance` command: serve, worker, migrate, demo seed."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from abeyance.app.logging import configure_logging
from abeyance.app.settings import Settings


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from abeyance.app.main import create_app

    if args.no_worker:
        settings = settings.model_copy(update={"run_worker": False})
    host = args.host or settings.host
    port = args.port or settings.port
    print(f"Abeyance API on http://{host}:{port}/v1  (OpenAPI docs: http://{host}:{port}/schema)", flush=True)
    print(
        f"database: {settings.database_url}  model: {settings.model}  "
        f"worker: {'in-process' if settings.run_worker else 'off'}",
        flush=True,
    )
    # Event streams never end by themselves: give them a few seconds, then close them on shutdown.
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    return 0


def _worker(settings: Settings, args: argparse.Namespace) -> int:
    from abeyance.app.container import build_container

    if args.concurrency:
        settings = settings.model_copy(update={"worker_concurrency": args.concurrency})

    async def main() -> None:
        container = build_container(settings)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await container.start(run_worker=True)
        await stop.wait()
        await container.close()

    asyncio.run(main())
    return 0


def _migrate(settings: Settings, _: argparse.Namespace) -> int:
    from abeyance.infra.db.migrations import upgrade

    upgrade(settings.database_url)
    print(f"migrated {settings.database_url} to head")
    return 0


def _demo_seed(settings: Settings, args: argparse.Namespace) -> int:
    from abeyance.domain.services import utcnow
    from abeyance.infra.db.engine import create_engine
    from abeyance.infra.db.migrations import upgrade
    from abeyance.infra.db.uow import SqlUnitOfWorkFactory
    from abeyance.infra.demo import seed_demo

    upgrade(settings.database_url)

    async def main() -> int:
        engine = create_engine(settings.database_url)
        try:
            return await seed_demo(SqlUnitOfWorkFactory(engine), args.workspace, utcnow())
        finally:
            await engine.dispose()

    added = asyncio.run(main())
    print(f"seeded {added} dead letters in workspace {args.workspace!r}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="abeyance", description="Agents whose tool calls wait for a human.")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP API (and, by default, a worker in-process)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--no-worker", action="store_true", help="API only; run `abeyance worker` separately")
    serve.set_defaults(func=_serve)
    worker = sub.add_parser("worker", help="run a worker against the database")
    worker.add_argument("--concurrency", type=int)
    worker.set_defaults(func=_worker)
    migrate = sub.add_parser("migrate", help="apply the database migrations")
    migrate.set_defaults(func=_migrate)
    demo = sub.add_parser("demo", help="demo data")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True)
    seed = demo_sub.add_parser("seed", help="insert a few dead letters and failure clusters")
    seed.add_argument("--workspace", default="default")
    seed.set_defaults(func=_demo_seed)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = Settings()
    configure_logging(settings.log_level, settings.log_json)
    return int(args.func(settings, args))


if __name__ == "__main__":
    sys.exit(main())
