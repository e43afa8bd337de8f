"""`sursis retention …` and `sursis audit verify`: policies, legal holds, purges, the audit chain.

The parser is built at every start of the command line (`sursis --help` too): the domain's services
and the settings load inside the commands that use them, not here."""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from sursis.app.settings import Settings
    from sursis.domain.audit.audit_chain import ChainReport
    from sursis.domain.records import Principal
    from sursis.domain.retention.audit_verify import AuditChainService
    from sursis.domain.retention.retention import RetentionPolicy, RetentionReport, RetentionService

    Services = tuple[RetentionService, AuditChainService]

T = TypeVar("T")


def _with_services(settings: Settings, use: Callable[[Services], Awaitable[T]]) -> T:
    """The command's retention and audit chain services, built by the composition root's storage
    (the API's and the worker's cipher and signing key)."""
    from sursis.app.storage import with_storage

    return with_storage(settings, lambda storage: use((storage.retention, storage.audit_chain)))


def workspace_name(value: str) -> str:
    """A workspace as every other path takes it: 1-100 letters, digits, `_`, `.` or `-`."""
    from sursis.domain.identity.keys import WORKSPACE

    if not WORKSPACE.match(value):
        raise argparse.ArgumentTypeError(
            "a workspace is 1-100 characters of letters, digits, '_', '.' or '-'"
        )
    return value


def period_days(value: str) -> int:
    """A whole number of days, 1 to MAX_DAYS, as the API takes it."""
    from sursis.domain.retention.retention import MAX_DAYS

    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"a whole number of days, 1 to {MAX_DAYS}")
    days = int(value)
    if not 1 <= days <= MAX_DAYS:
        raise argparse.ArgumentTypeError(f"a whole number of days, 1 to {MAX_DAYS}")
    return days


def hold_reason(value: str) -> str:
    if not 1 <= len(value.strip()) <= 2000 or "\x00" in value:
        raise argparse.ArgumentTypeError("a reason of 1 to 2000 characters")
    return value


def expected_head(value: str) -> tuple[int, str]:
    """`SEQ:HASH`, a head recorded from an earlier `verify`."""
    from sursis.domain.audit.audit_chain import parse_expected_head

    try:
        return parse_expected_head(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _print_reports(reports: list[RetentionReport], verb: str) -> None:
    if not reports:
        print("no workspace has a retention period: nothing is purged")
    for report in reports:
        hold = "  (legal hold: audit rows kept)" if report.held else ""
        print(f"workspace {report.workspace}: {report.conversations} conversations {verb}{hold}")
        for table, rows in sorted(report.rows.items()):
            if rows:
                print(f"  {table:28} {rows}")
        print(f"  {'audit_log':28} {report.audit_rows}")


def _plan(settings: Settings, args: argparse.Namespace, who: Principal) -> int:
    reports = _with_services(settings, lambda s: s[0].plan(who, args.workspace))
    _print_reports(reports, "would be purged")
    return 0


def _run(settings: Settings, args: argparse.Namespace, who: Principal) -> int:
    reports = _with_services(settings, lambda s: s[0].run(who, args.workspace))
    _print_reports(reports, "purged")
    return 0


def _show(policy: RetentionPolicy) -> None:
    def days(value: int | None) -> str:
        return "kept forever" if value is None else f"{value} days"

    print(
        f"workspace {policy.workspace}: conversations {days(policy.conversation_days)}, "
        f"audit log {days(policy.audit_days)}"
    )


def _set(settings: Settings, args: argparse.Namespace, who: Principal) -> int:
    from sursis.domain.retention.retention import RetentionPolicy

    policy = RetentionPolicy(args.workspace, args.conversation_days, args.audit_days)
    _show(_with_services(settings, lambda s: s[0].set_policy(who, policy)))
    return 0


def _get(settings: Settings, args: argparse.Namespace, who: Principal) -> int:
    _show(_with_services(settings, lambda s: s[0].get_policy(who, args.workspace)))
    return 0


def _hold(settings: Settings, args: argparse.Namespace, who: Principal) -> int:
    hold = _with_services(
        settings, lambda s: s[0].add_hold(who, args.workspace, args.conversation, args.reason)
    )
    print(f"legal hold {hold.id} on {hold.conversation_id or 'the whole workspace'} ({hold.workspace})")
    return 0


def _release(settings: Settings, args: argparse.Namespace, who: Principal) -> int:
    hold = _with_services(settings, lambda s: s[0].release_hold(who, args.hold_id))
    print(f"released legal hold {hold.id} ({hold.workspace})")
    return 0


def _holds(settings: Settings, args: argparse.Namespace, who: Principal) -> int:
    for hold in _with_services(settings, lambda s: s[0].list_holds(who, args.workspace)):
        target = hold.conversation_id or "(whole workspace)"
        print(f"{hold.id}  {hold.workspace:16}  {target!s:36}  {hold.created_at:%Y-%m-%d}  {hold.reason}")
    return 0


def _verify(settings: Settings, args: argparse.Namespace, _: Principal) -> int:
    """Exit 0 when every chain verifies, 1 when one does not."""
    if args.expect is not None and args.workspace is None:
        print("sursis: --expect checks one workspace's chain: give --workspace too", file=sys.stderr)
        return 2

    async def verify(services: Services) -> list[ChainReport]:
        chain = services[1]
        if args.seal:
            await chain.seal_all()
        return await chain.verify(args.workspace, expect=args.expect)

    return _print_chains(_with_services(settings, verify))


def _checkpoint(settings: Settings, args: argparse.Namespace, _: Principal) -> int:
    """Sign the head of every chain that verifies (exit 1 if one does not)."""
    if settings.audit_signing_key_file is None and settings.audit_signing_pkcs11_module is None:
        print(
            "sursis: set SURSIS_AUDIT_SIGNING_KEY_FILE to the private signing key "
            "(or SURSIS_AUDIT_SIGNING_PKCS11_MODULE and its settings: a key in a token)",
            file=sys.stderr,
        )
        return 2
    return _print_chains(_with_services(settings, lambda services: services[1].checkpoint(args.workspace)))


def _print_chains(reports: list[ChainReport]) -> int:
    broken = 0
    for report in reports:
        line = (
            f"workspace {report.workspace}: {report.checked} rows checked from seq {report.anchor_seq + 1}, "
            f"head seq {report.head_seq} hash {report.head_hash}, {report.unsealed} not sealed yet"
        )
        if report.ok:
            print(f"ok  {line}")
            continue
        broken += 1
        print(f"BROKEN  {line}")
        if (f := report.finding) is not None:
            row = f"row id {f.row_id}" if f.row_id is not None else "no row"
            print(f"  first breach: {f.breach.value} at seq {f.seq} ({row}): {f.detail}")
        for found in report.integrity:
            at = found.at.isoformat() if found.at is not None else "?"
            print(
                f"  finding: {found.action} at {at} (row id {found.row_id}, "
                f"pending call {found.correlation_id}): {found.detail}"
            )
    return 1 if broken else 0


def since_time(value: str) -> datetime:
    """An ISO 8601 date or time (UTC when it names no offset)."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            "an ISO 8601 date or time, e.g. 2026-01-31 or 2026-01-31T12:00Z"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _export(settings: Settings, args: argparse.Namespace, who: Principal) -> int:
    """Write one workspace's audit bundle (exit 2 when refused)."""
    from sursis.app.audit_export import export_bundle
    from sursis.app.storage import with_storage
    from sursis.domain.errors import ServiceError

    try:
        done = with_storage(
            settings,
            lambda storage: export_bundle(storage, args.workspace, args.out, args.since, actor=who.id),
        )
    except ServiceError as exc:
        print(f"sursis: {exc.message}", file=sys.stderr)
        return 2
    print(
        f"wrote {done.path}: {done.rows} rows up to seq {done.head_seq}, {done.checkpoints} checkpoints, "
        f"{done.policies} policy versions, {done.seals} decision seals; check it with "
        f"`python -m sursis.verify {done.path}`"
    )
    return 0


def _keygen(settings: Settings, args: argparse.Namespace, _: Principal) -> int:
    from sursis.infra.encryption.signing import SigningKeyInvalid, write_signing_key

    if args.pkcs11 or args.decision_seal:
        return _keygen_in_token(settings, args.decision_seal)
    if args.path is None:
        print("sursis: give the key file's PATH, or --pkcs11 for a key in a token", file=sys.stderr)
        return 2
    try:
        public = write_signing_key(args.path)
    except FileExistsError:
        print(f"sursis: {args.path} exists: a signing key is never overwritten", file=sys.stderr)
        return 2
    except SigningKeyInvalid as exc:
        print(f"sursis: {exc.message}", file=sys.stderr)
        return 2
    print(f"wrote the private signing key to {args.path} (mode 0600); its public key:")
    print(public, end="")
    return 0


def _keygen_in_token(settings: Settings, decision_seal: bool) -> int:
    """A new key made inside the token the settings name (never leaving it): the audit signing
    key pair, or (`decision_seal`) the decision-seal HMAC key."""
    from sursis.app.wiring.storage import pkcs11_parts, token_parts
    from sursis.infra.encryption.pkcs11_seal import generate_pkcs11_seal_key
    from sursis.infra.encryption.pkcs11_signer import generate_pkcs11_key
    from sursis.infra.encryption.signing import SigningKeyInvalid

    try:
        if decision_seal:
            label = settings.decision_seal_pkcs11_key
            if not label:
                raise SigningKeyInvalid("set SURSIS_DECISION_SEAL_PKCS11_KEY to the new key's label")
            module, token, pin = token_parts(settings.storage)
            generate_pkcs11_seal_key(module, token, label, pin)
            print(f"made the decision-seal key {label!r} in the token (it never leaves the token)")
            return 0
        module, token, key, pin = pkcs11_parts(settings.storage)
        public = generate_pkcs11_key(module, token, key, pin)
    except SigningKeyInvalid as exc:
        print(f"sursis: {exc.message}", file=sys.stderr)
        return 2
    print(f"made the signing key {key!r} in token {token!r} (it never leaves the token); its public key:")
    print(public, end="")
    return 0


def add_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], who: Callable[[], Principal]
) -> None:
    """Register `retention` and `audit` on the `sursis` parser; `who()` is the command line's
    principal (made when a command runs: the domain's records load only then)."""

    def bind(handler: Callable[[Settings, argparse.Namespace, Principal], int]) -> Callable[..., int]:
        return lambda settings, args: handler(settings, args, who())

    retention = sub.add_parser("retention", help="retention policies, legal holds, purges")
    r_sub = retention.add_subparsers(dest="retention_command", required=True)
    plan = r_sub.add_parser("plan", help="what a run would purge now, per table (changes nothing)")
    plan.add_argument("--workspace", type=workspace_name)
    plan.set_defaults(func=bind(_plan))
    run = r_sub.add_parser("run", help="purge what the policies say is due, in batches")
    run.add_argument("--workspace", type=workspace_name)
    run.set_defaults(func=bind(_run))
    show = r_sub.add_parser("get", help="a workspace's policy")
    show.add_argument("--workspace", required=True, type=workspace_name)
    show.set_defaults(func=bind(_get))
    policy = r_sub.add_parser("set", help="set a workspace's policy (a period left out is kept forever)")
    policy.add_argument("--workspace", required=True, type=workspace_name)
    policy.add_argument(
        "--conversation-days", type=period_days, help="purge conversations idle this many days"
    )
    policy.add_argument(
        "--audit-days", type=period_days, help="purge audit rows older than this (>= conversation days)"
    )
    policy.set_defaults(func=bind(_set))
    hold = r_sub.add_parser("hold", help="place a legal hold on a workspace or one conversation")
    hold.add_argument("--workspace", required=True, type=workspace_name)
    hold.add_argument("--conversation", type=uuid.UUID)
    hold.add_argument("--reason", required=True, type=hold_reason)
    hold.set_defaults(func=bind(_hold))
    holds = r_sub.add_parser("holds", help="list legal holds")
    holds.add_argument("--workspace", type=workspace_name)
    holds.set_defaults(func=bind(_holds))
    release = r_sub.add_parser("release", help="release a legal hold by its id")
    release.add_argument("hold_id", type=uuid.UUID)
    release.set_defaults(func=bind(_release))
    audit = sub.add_parser("audit", help="the audit log's hash chain")
    a_sub = audit.add_subparsers(dest="audit_command", required=True)
    verify = a_sub.add_parser("verify", help="walk each workspace's chain; exit 1 at the first breach")
    verify.add_argument("--workspace", type=workspace_name)
    verify.add_argument("--seal", action="store_true", help="seal the rows written since the last seal first")
    verify.add_argument(
        "--expect",
        type=expected_head,
        metavar="SEQ:HASH",
        help="a head recorded earlier (outside the database): the chain must still hold it "
        "(with SURSIS_AUDIT_CHECKPOINT_DIR, the newest external checkpoint is checked too)",
    )
    verify.set_defaults(func=bind(_verify))
    checkpoint = a_sub.add_parser(
        "checkpoint",
        help="verify each chain, then sign its head (the first checkpoint, or after a key change)",
    )
    checkpoint.add_argument("--workspace", type=workspace_name)
    checkpoint.set_defaults(func=bind(_checkpoint))
    export = a_sub.add_parser(
        "export", help="write a workspace's audit bundle, checked offline by `python -m sursis.verify`"
    )
    export.add_argument("--workspace", required=True, type=workspace_name)
    export.add_argument("--since", type=since_time, help="only rows dated at or after this (ISO 8601)")
    export.add_argument(
        "--out",
        required=True,
        type=Path,
        help="a new directory, or an archive ending in .tar.gz, .tgz or .tar",
    )
    export.set_defaults(func=bind(_export))
    keygen = a_sub.add_parser(
        "keygen", help="write a new Ed25519 signing key (mode 0600); print its public key"
    )
    keygen.add_argument("path", type=Path, nargs="?", help="the new key file (not with --pkcs11)")
    keygen.add_argument(
        "--pkcs11",
        action="store_true",
        help="make the key pair inside the token SURSIS_AUDIT_SIGNING_PKCS11_* names instead",
    )
    keygen.add_argument(
        "--decision-seal",
        action="store_true",
        help="make the decision-seal HMAC key SURSIS_DECISION_SEAL_PKCS11_KEY names, in that token",
    )
    keygen.set_defaults(func=bind(_keygen))
