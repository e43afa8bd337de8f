"""The command line as a client of the HTTP API: where the API is, which key is sent, and how one
command's request runs and its answer is printed.

`sursis pending`, `groups`, `delegations`, `policy`, `mcp` and `wait-ready` act as the key they send
(`SURSIS_API_KEY`, or `--key-file`), so the audit log and the workspace checks see exactly what an
HTTP request would have done. The command modules import this one, never each other for it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sursis.app.settings import Settings
    from sursis.client import AsyncClient

Action = Callable[["AsyncClient", argparse.Namespace], Awaitable[Any]]
"""What a client command does with the API client (`args.pending_action`)."""

Printer = Callable[[Any], None]
"""How a client command prints what its action returned (`args.printer`), unless `--json`."""

NO_KEY = "sursis: no API key: set SURSIS_API_KEY or pass --key-file"


def quiet_http_client() -> None:
    """httpx logs every request at INFO: on a command line that is noise around the answer."""
    logging.getLogger("httpx").setLevel(logging.WARNING)


def api_url(settings: Settings) -> str:
    """Where the command-line client finds the API: `SURSIS_API_URL`, else `serve`'s host and port."""
    if settings.api_url:
        return settings.api_url
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{host}:{settings.port}"


def api_key(settings: Settings, args: argparse.Namespace) -> str | None:
    """What a command sends as its bearer: the `--key-file`'s key, else `SURSIS_API_KEY`, else the
    ID token of the person `sursis login` signed in; None when none of them."""
    from sursis.app.cli.login import person_token

    if args.key_file:
        return Path(args.key_file).read_text().strip() or None
    if settings.api_key:
        return settings.api_key.get_secret_value()
    return person_token(settings)


def api_target(settings: Settings, args: argparse.Namespace) -> tuple[str, str] | None:
    """`(base URL, key)` of a client command (`--url`, else `api_url`); None, with the line that says
    so on stderr, when there is no key to send."""
    from sursis.app.cli.login import LoginFailed

    quiet_http_client()
    try:
        key = api_key(settings, args)
    except LoginFailed as error:
        print(f"sursis: {error}", file=sys.stderr)
        return None
    if key is None:
        print(NO_KEY, file=sys.stderr)
        return None
    return args.url or api_url(settings), key


def run_action(settings: Settings, args: argparse.Namespace) -> int:
    """Run `args.pending_action` with a client of the API and print what it returned: JSON with
    `--json`, else with `args.printer`."""
    import httpx

    from sursis.client import AsyncClient, SursisError

    target = api_target(settings, args)
    if target is None:
        return 2
    base, key = target
    action: Action = args.pending_action

    async def main() -> Any:
        async with AsyncClient(base, key) as client:
            return await action(client, args)

    import asyncio

    try:
        outcome = asyncio.run(main())
    except SursisError as error:
        print(f"sursis: {error.code}: {error.detail}", file=sys.stderr)
        return 2
    except httpx.TransportError as error:
        print(f"sursis: cannot reach {base} ({type(error).__name__})", file=sys.stderr)
        return 1
    if args.json and outcome is None:
        print("null")
    elif args.json:
        items = outcome if isinstance(outcome, list) else [outcome]
        dumped = [item.model_dump(mode="json") for item in items]
        print(json.dumps(dumped if isinstance(outcome, list) else dumped[0], indent=2))
    else:
        printer: Printer = args.printer
        printer(outcome)
    return 0
