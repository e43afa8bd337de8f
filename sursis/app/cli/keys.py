"""`sursis keys create | list | revoke`, and the first admin key `serve` makes on a database with
none: API keys straight in the database (the command line administers it, audited as `cli`)."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from sursis.domain.access import Role

if TYPE_CHECKING:
    from sursis.app.settings import Settings
    from sursis.app.storage import Storage
    from sursis.domain.identity.keys import IssuedKey, KeyService
    from sursis.domain.records import Principal

T = TypeVar("T")


@cache
def command_line() -> Principal:
    """Whoever can run the command against the database administers it; audited as `cli`. Made
    on first use: the parser (`sursis --help` too) does not load the domain's records."""
    from sursis.domain.records import Principal

    return Principal(id="cli", role=Role.ADMIN, workspace=None, name="command line")


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
            return len(await keys.list_keys(command_line(), include_revoked=True))

        if _with_keys(settings, count_keys) == 0:
            print(
                "No API keys yet: make one with `sursis keys create --role admin`, "
                "or set SURSIS_ADMIN_KEY_FILE to have `serve` write the first one there.",
                flush=True,
            )
        return None
    issued = _with_keys(settings, lambda keys: keys.create_first_admin(command_line()))
    if issued is None:
        return None
    if key_file:
        _write_key_file(key_file, issued)
        print(f"No API keys yet; wrote the first admin key to {key_file} (mode 0600).", flush=True)
    else:
        _print_new_key(issued, "No API keys yet; made the first admin key:")
    return issued


def _keys_create(settings: Settings, args: argparse.Namespace) -> int:
    issued = _with_keys(
        settings,
        lambda keys: keys.create(
            command_line(),
            role=args.role,
            workspace=args.workspace,
            name=args.name,
            expires_at=args.expires_at,
        ),
    )
    _print_new_key(issued, "New API key:")
    return 0


def _keys_list(settings: Settings, args: argparse.Namespace) -> int:
    found = _with_keys(settings, lambda keys: keys.list_keys(command_line(), include_revoked=args.all))
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
    key = _with_keys(settings, lambda keys: keys.revoke(command_line(), args.key_id))
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


def add_key_commands(sub: Any) -> None:
    """Register `sursis keys ...` on the top-level subparsers."""
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
