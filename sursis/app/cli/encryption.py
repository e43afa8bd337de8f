"""`sursis encryption status | rotate | seal-existing | compact`: what each key protects,
re-encryption under the active key, the deliberate sealing of values written before encryption was
on, and reclaiming the space old values still occupy on disk."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sursis.app.settings import Settings

COMMAND_LINE_ACTOR = "cli"

LEFT_ON_DISK = (
    "the old values are no longer readable through the service, but their bytes stay on disk: in\n"
    "the tables' files until compacted (`sursis encryption compact`), in the write-ahead log until\n"
    "it is recycled, and in every backup taken before now (docs/runbooks/encryption.md)"
)


def check_keyring(settings: Settings) -> None:
    """Raises `KeyringInvalid` (a clear message, no key material) if the configured keyring is malformed."""
    from sursis.app.wiring.storage import build_cipher

    build_cipher(settings.storage)


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from sursis.app.storage import Storage, with_storage
    from sursis.domain.encryption import key_check_value
    from sursis.infra.db.rotation import key_counts

    async def main(storage: Storage) -> int:
        cipher, state = storage.cipher, storage.encryption
        counts = await key_counts(storage.uow.engine, cipher)
        print(f"encryption: {'on' if state.on else 'off'}")
        print(f"active key: {cipher.active_key_id or '(none: encryption is off)'}")
        print(f"keyring: {', '.join(cipher.key_ids) or '(empty)'}")
        totals: dict[str, int] = {}
        for column in counts:
            for key_id, count in column.by_key.items():
                totals[key_id] = totals.get(key_id, 0) + count
        print(f"{'key':20} {'values':>10}")
        for key_id, count in totals.items():
            print(f"{key_id:20} {count:>10}")
        if state.stored:
            print()
            print(f"{'key id':20} {'check value':18} {'in keyring':12} first used")
            for stored in state.stored:
                held = stored.key_id in cipher.key_ids
                matches = held and key_check_value(cipher.keys.data_key(stored.key_id)) == stored.check_value
                shown = "yes" if matches else "no"
                used = f"{stored.first_used_at:%Y-%m-%d}"
                print(f"{stored.key_id:20} {stored.check_value[:16]:18} {shown:12} {used}")
        if args.columns:
            print()
            for column in counts:
                listed = "  ".join(f"{k}={v}" for k, v in column.by_key.items() if v)
                print(f"{column.table}.{column.column}: {listed or '-'}")
        retired = [k for k in cipher.key_ids[1:] if totals.get(k, 0) == 0]
        if retired:
            print(f"no value is under {', '.join(retired)}: safe to remove from the keyring")
        return 0

    return with_storage(settings, main)


def _rotate(settings: Settings, args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from sursis.app.storage import Storage, with_storage
    from sursis.app.wiring.storage import build_cipher
    from sursis.infra.db.rotation import rotate, rows_to_rotate, unsealed_rows

    if build_cipher(settings.storage).active_key_id is None:
        print(
            "sursis: encryption is off: set SURSIS_ENCRYPTION_KEYS (the new key first) to rotate",
            file=sys.stderr,
        )
        return 2

    async def main(storage: Storage) -> int:
        engine, cipher = storage.uow.engine, storage.cipher
        active = cipher.active_key_id
        assert active is not None
        total = await rows_to_rotate(engine, active)
        columns: list[Any] = [TextColumn(f"re-encrypting under {active}"), BarColumn(), MofNCompleteColumn()]
        with Progress(*columns, TimeRemainingColumn(), disable=args.quiet) as progress:
            task = progress.add_task("rotate", total=total)
            done = await rotate(
                engine,
                cipher,
                batch_size=args.batch_size,
                pause_seconds=args.pause,
                on_batch=lambda count: progress.advance(task, count),
            )
        if storage.encryption.sealed_at_start is not None:  # this start turned encryption on
            done += storage.encryption.sealed_at_start.rows
        left = await rows_to_rotate(engine, active)
        print(f"rewrote {done} rows; {left} rows still hold values under another key")
        if plain := await unsealed_rows(engine):
            print(
                f"{plain} rows hold values in plaintext, left as they are (refused on read): "
                "`sursis encryption seal-existing` seals them if they were written before encryption"
            )
        if done:
            print(LEFT_ON_DISK)
        return 0 if left == 0 else 1

    return with_storage(settings, main)


def _seal_existing(settings: Settings, args: argparse.Namespace) -> int:
    from sursis.app.storage import Storage, with_storage
    from sursis.app.wiring.storage import (
        build_cipher,
        record_sealed_existing,
        seal_pre_approvals,
        unsealed_pre_approvals,
    )
    from sursis.infra.db.rotation import seal_existing, unsealed_rows

    if build_cipher(settings.storage).active_key_id is None:
        print("sursis: encryption is off: set SURSIS_ENCRYPTION_KEYS to seal values", file=sys.stderr)
        return 2

    async def main(storage: Storage) -> int:
        engine, cipher = storage.uow.engine, storage.cipher
        waiting = await unsealed_rows(engine)
        grants = await unsealed_pre_approvals(storage.uow)
        if not waiting and not grants:
            print("no value is in plaintext and every pre-approval is sealed: nothing to seal")
            return 0
        if not args.yes:
            found = [f"{waiting} rows hold values in plaintext in encrypted columns"] if waiting else []
            if grants:
                found.append(f"{grants} pre-approvals carry no seal (made before decisions were sealed)")
            print(
                f"{' and '.join(found)}. Sealing takes each one as it is stored now, as real: run "
                "this only for a database being moved to encryption or just upgraded, before anyone "
                "without the key could write to it. Again with --yes to seal them.",
                file=sys.stderr,
            )
            return 1
        if waiting:
            sealed = await seal_existing(engine, cipher, batch_size=args.batch_size)
            await record_sealed_existing(storage.uow, COMMAND_LINE_ACTOR, sealed)
            for column, count in sealed.columns.items():
                print(f"{column}: sealed {count}")
            print(f"sealed {sealed.values} values under {cipher.active_key_id}")
            if sealed.values:
                print(LEFT_ON_DISK)
        if grants:
            # After the values: a pre-approval's `args_match` is read (opened) to be sealed.
            count = await seal_pre_approvals(storage.uow, COMMAND_LINE_ACTOR)
            print(f"sealed {count} pre-approvals under {cipher.active_key_id}")
        return 0

    return with_storage(settings, main)


def _compact(settings: Settings, args: argparse.Namespace) -> int:
    from sursis.app.storage import Storage, with_storage
    from sursis.infra.db.rotation import compact

    async def main(storage: Storage) -> int:
        for table in await compact(storage.uow.engine):
            print(f"compacted {table}")
        print(
            "the tables' files no longer hold the rewritten values; the write-ahead log and older "
            "backups still may (docs/runbooks/encryption.md)"
        )
        return 0

    return with_storage(settings, main)


def _batch_size(value: str) -> int:
    number = int(value)
    if not 1 <= number <= 10_000:
        raise argparse.ArgumentTypeError("must be between 1 and 10000")
    return number


def add_encryption_commands(sub: Any) -> None:
    encryption = sub.add_parser(
        "encryption", help="encryption at rest: status, rotate, seal-existing, compact"
    )
    encryption_sub = encryption.add_subparsers(dest="encryption_command", required=True)
    status = encryption_sub.add_parser(
        "status", help="on or off, the active key, each key's check value and how many values it protects"
    )
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
    seal = encryption_sub.add_parser(
        "seal-existing",
        help="seal the values an encrypted column still holds in plaintext (a database being moved "
        "to encryption); audited",
    )
    seal.add_argument("--yes", action="store_true", help="seal them (without it: only say how many)")
    seal.add_argument("--batch-size", type=_batch_size, default=500, help="rows per transaction")
    seal.set_defaults(func=_seal_existing)
    compact = encryption_sub.add_parser(
        "compact",
        help="rewrite the encrypted tables' files so old values are gone from them "
        "(PostgreSQL: VACUUM FULL, which locks each table while it runs; SQLite: VACUUM)",
    )
    compact.set_defaults(func=_compact)
