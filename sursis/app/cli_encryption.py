"""`sursis encryption status | rotate`: what each key protects, and re-encryption under the active key."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from sursis.app.settings import Settings


def check_keyring(settings: Settings) -> None:
    """Raises `KeyringInvalid` (a clear message, no key material) if the configured keyring is malformed."""
    from sursis.app.container import build_cipher

    build_cipher(settings)


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from sursis.app.container import build_cipher
    from sursis.infra.db.engine import create_engine
    from sursis.infra.db.rotation import key_counts

    cipher = build_cipher(settings)

    async def main() -> int:
        engine = create_engine(settings.database_url)
        try:
            counts = await key_counts(engine, cipher)
        finally:
            await engine.dispose()
        print(f"active key: {cipher.active_key_id or '(none: encryption is off)'}")
        print(f"keyring: {', '.join(cipher.key_ids) or '(empty)'}")
        totals: dict[str, int] = {}
        for column in counts:
            for key_id, count in column.by_key.items():
                totals[key_id] = totals.get(key_id, 0) + count
        print(f"{'key':20} {'values':>10}")
        for key_id, count in totals.items():
            print(f"{key_id:20} {count:>10}")
        if args.columns:
            print()
            for column in counts:
                listed = "  ".join(f"{k}={v}" for k, v in column.by_key.items() if v)
                print(f"{column.table}.{column.column}: {listed or '-'}")
        retired = [k for k in cipher.key_ids[1:] if totals.get(k, 0) == 0]
        if retired:
            print(f"no value is under {', '.join(retired)}: safe to remove from the keyring")
        return 0

    return asyncio.run(main())


def _rotate(settings: Settings, args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from sursis.app.container import build_cipher
    from sursis.infra.db.engine import create_engine
    from sursis.infra.db.rotation import rotate, rows_to_rotate

    cipher = build_cipher(settings)
    if cipher.active_key_id is None:
        print(
            "sursis: encryption is off: set SURSIS_ENCRYPTION_KEYS (the new key first) to rotate",
            file=sys.stderr,
        )
        return 2
    active = cipher.active_key_id

    async def main() -> int:
        engine = create_engine(settings.database_url)
        try:
            total = await rows_to_rotate(engine, active)
            columns: list[Any] = [
                TextColumn(f"re-encrypting under {active}"),
                BarColumn(),
                MofNCompleteColumn(),
            ]
            with Progress(*columns, TimeRemainingColumn(), disable=args.quiet) as progress:
                task = progress.add_task("rotate", total=total)
                done = await rotate(
                    engine,
                    cipher,
                    batch_size=args.batch_size,
                    pause_seconds=args.pause,
                    on_batch=lambda count: progress.advance(task, count),
                )
            left = await rows_to_rotate(engine, active)
        finally:
            await engine.dispose()
        print(f"rewrote {done} rows; {left} rows still hold values under another key or in plaintext")
        return 0 if left == 0 else 1

    return asyncio.run(main())


def _batch_size(value: str) -> int:
    number = int(value)
    if not 1 <= number <= 10_000:
        raise argparse.ArgumentTypeError("must be between 1 and 10000")
    return number


def add_encryption_commands(sub: Any) -> None:
    encryption = sub.add_parser("encryption", help="encryption at rest: status, rotate")
    encryption_sub = encryption.add_subparsers(dest="encryption_command", required=True)
    status = encryption_sub.add_parser("status", help="how many values each key still protects")
    status.add_argument("--columns", action="store_true", help="also per table and column")
    status.set_defaults(func=_status)
    rotate = encryption_sub.add_parser(
        "rotate", help="re-encrypt every value under the active key, in batches, while the service runs"
    )
    rotate.add_argument("--batch-size", type=_batch_size, default=500, help="rows per transaction")
    rotate.add_argument(
        "--pause", type=float, default=0.0, help="seconds to wait between batches (less load on the service)"
    )
    rotate.add_argument("--quiet", action="store_true", help="no progress bar")
    rotate.set_defaults(func=_rotate)
