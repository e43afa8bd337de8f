"""`sursis pending list | show | approve | deny | revise | answer`: decide calls from a terminal.

These commands are HTTP clients of a running service (`sursis.client.AsyncClient`), not database
tools: they act as the key they send (`SURSIS_API_KEY`, or `--key-file`), so the audit log, the
workspace checks and the inbox see exactly what an HTTP request would have done.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from sursis.app.cli.groups import add_group_commands, add_reassign_command
from sursis.app.cli.http import Action, run_action
from sursis.domain.states import PendingStatus
from sursis.domain.tools import PendingKind

if TYPE_CHECKING:
    from sursis.client import AsyncClient
    from sursis.client.models import PendingCall


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error.msg}") from None


def _json_object(text: str) -> dict[str, Any]:
    value = _json_value(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _show_table(calls: list[PendingCall]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in (
        "correlation_id",
        "status",
        "kind",
        "tool",
        "agent",
        "created",
        "votes",
        "review",
        "effect",
    ):
        table.add_column(column, overflow="fold")
    for call in calls:
        table.add_row(
            str(call.correlation_id),
            call.status,
            call.kind,
            call.tool_name,
            call.agent,
            f"{call.created_at:%Y-%m-%d %H:%M:%S}",
            _votes_cell(call),
            _review_cell(call),
            call.effect_description,
        )
    Console(width=200 if not sys.stdout.isatty() else None).print(table)
    if not calls:
        print("(none)")


def _votes_cell(call: PendingCall) -> str:
    """`approvals/quorum`, the escalation level when one was reached, and `you` when the key may vote."""
    if call.quorum is None:
        return "-"
    approvals = call.quorum - (call.still_needed or 0)
    cell = f"{approvals}/{call.quorum}"
    if call.escalation_level:
        cell += f" esc {call.escalation_level}"
    return cell + (" you" if call.can_decide else "")


def _review_cell(call: PendingCall) -> str:
    """The reviewer's verdict and what it did (`yes left_to_people`); `-` when the route names none."""
    review = call.review
    if review is None:
        return "-"
    return f"{review.verdict} {review.effect}" if review.effect else review.verdict


def review_line(call: PendingCall) -> str | None:
    """The reviewer's verdict as a person reads it: `yes by M (left_to_people) at T: reason`."""
    review = call.review
    if review is None:
        return None
    line = f"{review.verdict} by {review.model}"
    if review.effect:
        line += f" ({review.effect})"
    if review.policy_version is not None:
        line += f" under policy v{review.policy_version}"
    if review.decided_at is not None:
        line += f" at {review.decided_at:%Y-%m-%d %H:%M:%S}"
    if review.reason:
        line += f": {review.reason}"
    return line


def vote_lines(call: PendingCall) -> list[str]:
    """Each vote as a person reads it: `approve by Y for X at T: reason`."""
    lines = []
    for vote in call.votes or []:
        by = vote.cast_by_name or vote.cast_by
        line = f"{vote.decision} by {by}"
        if vote.on_behalf_of:
            line += f" for {vote.approver_name or vote.approver}"
        line += f" at {vote.at:%Y-%m-%d %H:%M:%S}"
        if vote.reason:
            line += f": {vote.reason}"
        lines.append(line)
    return lines


def _show_call(call: PendingCall) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, value in call.model_dump(mode="json").items():
        if name == "votes" and value is not None:
            table.add_row(name, "\n".join(vote_lines(call)) or "(none yet)")
        elif name == "review" and value is not None:
            table.add_row(name, review_line(call) or "")
        elif value is not None:
            table.add_row(name, value if isinstance(value, str) else json.dumps(value))
    Console(width=200 if not sys.stdout.isatty() else None).print(table)


async def _list(client: AsyncClient, args: argparse.Namespace) -> list[PendingCall]:
    page = await client.list_pending(
        status=args.status,
        kind=args.kind,
        tool_name=args.tool,
        limit=args.limit,
    )
    return page.items


async def _show(client: AsyncClient, args: argparse.Namespace) -> PendingCall:
    return await client.get_pending(args.correlation_id)


def _resolve(decision: str) -> Action:
    async def resolve(client: AsyncClient, args: argparse.Namespace) -> PendingCall:
        return await client.resolve(
            args.correlation_id,
            decision,
            reason=getattr(args, "reason", None),
            args=getattr(args, "args", None),
            result=getattr(args, "result", None),
        )

    return resolve


def show_calls(outcome: list[PendingCall] | PendingCall) -> None:
    """A list of calls as a table, one call with every field."""
    if isinstance(outcome, list):
        _show_table(outcome)
    else:
        _show_call(outcome)


def add_pending_commands(sub: Any) -> None:
    """Register `sursis pending ...` on the top-level subparsers."""
    pending = sub.add_parser("pending", help="list and decide pending calls over the HTTP API")
    pending_sub = pending.add_subparsers(dest="pending_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="the API's base URL (default: SURSIS_API_URL, else http://HOST:PORT)")
    common.add_argument("--key-file", help="a file holding the API key (default: SURSIS_API_KEY)")
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")

    listing = pending_sub.add_parser("list", parents=[common], help="the workspace's pending calls")
    listing.add_argument(
        "--status",
        default="awaiting",
        choices=[*(status.value for status in PendingStatus), "all"],
    )
    listing.add_argument("--kind", choices=[kind.value for kind in PendingKind])
    listing.add_argument("--tool", help="only calls of this tool")
    listing.add_argument("--limit", type=int, default=50)
    listing.set_defaults(func=run_action, pending_action=_list, printer=show_calls)

    show = pending_sub.add_parser("show", parents=[common], help="one call, with its full arguments")
    show.add_argument("correlation_id")
    show.set_defaults(func=run_action, pending_action=_show, printer=show_calls)

    approve = pending_sub.add_parser("approve", parents=[common], help="approve (optionally edited args)")
    approve.add_argument("correlation_id")
    approve.add_argument("--args", type=_json_object, help="edited arguments, a JSON object")
    approve.add_argument("--reason")
    approve.set_defaults(func=run_action, pending_action=_resolve("approve"), printer=show_calls)

    for decision, help_text in (("deny", "deny, with a reason"), ("revise", "ask for a revised call")):
        parser = pending_sub.add_parser(decision, parents=[common], help=help_text)
        parser.add_argument("correlation_id")
        parser.add_argument("--reason", required=True)
        parser.set_defaults(func=run_action, pending_action=_resolve(decision), printer=show_calls)

    answer = pending_sub.add_parser("answer", parents=[common], help="answer a question or a client call")
    answer.add_argument("correlation_id")
    answer.add_argument("--result", type=_json_value, required=True, help="the answer, as JSON")
    answer.set_defaults(func=run_action, pending_action=_resolve("answer"), printer=show_calls)

    add_reassign_command(pending_sub, common, show_calls)
    add_group_commands(sub, common)
