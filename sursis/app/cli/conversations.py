"""`sursis conversations fork`: fork a conversation at one of its user messages, from a terminal.

An HTTP client of a running service (`sursis.client.AsyncClient`), like `sursis pending`: it acts
as the key it sends (`SURSIS_API_KEY`, or `--key-file`), so the fork's audit row names that key.
"""

from __future__ import annotations

import argparse
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sursis.client import AsyncClient
    from sursis.client.models import Forked


def _seq(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("a message's seq, a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("a message's seq is 1 or more")
    return value


async def _fork(client: AsyncClient, args: argparse.Namespace) -> Forked:
    return await client.fork(args.conversation_id, args.at, message=args.message, wait=args.wait)


def _show_fork(forked: Forked) -> None:
    origin = forked.conversation.forked_from
    where = f" (forked from {origin.conversation_id} at message {origin.seq})" if origin else ""
    print(f"conversation {forked.conversation.id}{where}")
    print(f"run          {forked.run.id} {forked.run.status}")
    for call in forked.run.pending:
        print(f"pending      {call.correlation_id} {call.kind} {call.tool_name}: {call.effect_description}")
    if forked.run.output is not None:
        print(f"output       {forked.run.output}")


def add_conversation_commands(sub: Any) -> None:
    """Register `sursis conversations fork` on the top-level subparsers."""
    from sursis.app.cli.http import run_action

    conversations = sub.add_parser("conversations", help="conversations over the HTTP API: fork")
    c_sub = conversations.add_subparsers(dest="conversations_command", required=True)
    fork = c_sub.add_parser(
        "fork", help="a new conversation with the history before a user message, run from there"
    )
    fork.add_argument("conversation_id", type=uuid.UUID)
    fork.add_argument("--at", type=_seq, required=True, help="the seq of a user message of the conversation")
    fork.add_argument("--message", help="the fork's message at that place (default: the original's)")
    fork.add_argument("--wait", type=float, default=10.0, help="seconds to wait for the run (default 10)")
    fork.add_argument("--url", help="the API's base URL (default: SURSIS_API_URL, else http://HOST:PORT)")
    fork.add_argument("--key-file", help="a file holding the API key (default: SURSIS_API_KEY)")
    fork.add_argument("--json", action="store_true", help="print the response as JSON")
    fork.set_defaults(func=run_action, pending_action=_fork, printer=_show_fork)
