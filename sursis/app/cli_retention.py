"""`sursis retention …` and `sursis audit verify`: policies, legal holds, purges, the audit chain."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sursis.app.settings import Settings
from sursis.domain.audit_chain import ChainReport
from sursis.domain.audit_verify import AuditChainService
from sursis.domain.records import Principal
from sursis.domain.retention import RetentionPolicy, RetentionReport, RetentionService

T = TypeVar("T")
Services = tuple[RetentionService, AuditChainService]


def _with_services(settings: Settings, use: Callable[[Services], Awaitable[T]]) -> T:
    from sursis.domain.clock import utcnow
    from sursis.infra.db.engine import create_engine
    from sursis.infra.db.uow import SqlUnitOfWorkFactory

    async def main() -> T:
        engine = create_engine(settings.database_url)
        try:
            uow = SqlUnitOfWorkFactory(engine)
            retention = RetentionService(uow, utcnow, batch=settings.retention_batch)
            return await use((retention, AuditChainService(uow, utcnow)))
        finally:
            await engine.dispose()

    return asyncio.run(main())


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

    async def verify(services: Services) -> list[ChainReport]:
        chain = services[1]
        if args.seal:
            await chain.seal_all()
        return await chain.verify(args.workspace)

    broken = 0
    for report in _with_services(settings, verify):
        line = (
            f"workspace {report.workspace}: {report.checked} rows checked from seq {report.anchor_seq + 1}, "
            f"head seq {report.head_seq} hash {report.head_hash}, {report.unsealed} not sealed yet"
        )
        if report.finding is None:
            print(f"ok  {line}")
            continue
        broken += 1
        f = report.finding
        row = f"row id {f.row_id}" if f.row_id is not None else "no row"
        print(f"BROKEN  {line}\n  first breach: {f.breach.value} at seq {f.seq} ({row}): {f.detail}")
    return 1 if broken else 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser], who: Principal) -> None:
    """Register `retention` and `audit` on the `sursis` parser; `who` is the command line's principal."""

    def bind(handler: Callable[[Settings, argparse.Namespace, Principal], int]) -> Callable[..., int]:
        return lambda settings, args: handler(settings, args, who)

    retention = sub.add_parser("retention", help="retention policies, legal holds, purges")
    r_sub = retention.add_subparsers(dest="retention_command", required=True)
    plan = r_sub.add_parser("plan", help="what a run would purge now, per table (changes nothing)")
    plan.add_argument("--workspace")
    plan.set_defaults(func=bind(_plan))
    run = r_sub.add_parser("run", help="purge what the policies say is due, in batches")
    run.add_argument("--workspace")
    run.set_defaults(func=bind(_run))
    show = r_sub.add_parser("get", help="a workspace's policy")
    show.add_argument("--workspace", required=True)
    show.set_defaults(func=bind(_get))
    policy = r_sub.add_parser("set", help="set a workspace's policy (a period left out is kept forever)")
    policy.add_argument("--workspace", required=True)
    policy.add_argument("--conversation-days", type=int, help="purge conversations idle this many days")
    policy.add_argument(
        "--audit-days", type=int, help="purge audit rows older than this (>= conversation days)"
    )
    policy.set_defaults(func=bind(_set))
    hold = r_sub.add_parser("hold", help="place a legal hold on a workspace or one conversation")
    hold.add_argument("--workspace", required=True)
    hold.add_argument("--conversation", type=uuid.UUID)
    hold.add_argument("--reason", required=True)
    hold.set_defaults(func=bind(_hold))
    holds = r_sub.add_parser("holds", help="list legal holds")
    holds.add_argument("--workspace")
    holds.set_defaults(func=bind(_holds))
    release = r_sub.add_parser("release", help="release a legal hold by its id")
    release.add_argument("hold_id", type=uuid.UUID)
    release.set_defaults(func=bind(_release))
    audit = sub.add_parser("audit", help="the audit log's hash chain")
    a_sub = audit.add_subparsers(dest="audit_command", required=True)
    verify = a_sub.add_parser("verify", help="walk each workspace's chain; exit 1 at the first breach")
    verify.add_argument("--workspace")
    verify.add_argument("--seal", action="store_true", help="seal the rows written since the last seal first")
    verify.set_defaults(func=bind(_verify))
