"""`sursis policy get | set | simulate`: a workspace's approval policy from a terminal.

Like `sursis pending`, these are HTTP clients of a running service acting as the key they send
(`SURSIS_API_KEY` or `--key-file`; policies need an admin key), so validation, versions and the
audit log are exactly those of `GET|PUT /v1/policies` and `POST /v1/policies/simulate`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sursis.app.cli.http import api_target
from sursis.domain.errors import Error

if TYPE_CHECKING:
    import httpx

    from sursis.app.settings import Settings

Action = Callable[["httpx.AsyncClient", argparse.Namespace], Awaitable["httpx.Response"]]


class _Refused(Error):
    def __init__(self, code: str, detail: str, errors: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.errors = errors


def _document(path: str) -> dict[str, Any]:
    """A policy document (`{"rules": [...]}`) from a file, or `-` for standard input."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"{path}: not JSON: {error.msg}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{path}: must be a JSON object with `rules`")
    return value


async def _get(http: httpx.AsyncClient, args: argparse.Namespace) -> httpx.Response:
    params: dict[str, Any] = {}
    if args.workspace:
        params["workspace"] = args.workspace
    path = "/v1/policies" if args.version is None else f"/v1/policies/versions/{args.version}"
    return await http.get(path, params=params)


async def _set(http: httpx.AsyncClient, args: argparse.Namespace) -> httpx.Response:
    body = {"rules": args.document.get("rules"), "comment": args.comment or args.document.get("comment")}
    if args.workspace:
        body["workspace"] = args.workspace
    if args.expected_version is not None:
        body["expected_version"] = args.expected_version
    return await http.put("/v1/policies", json=body)


async def _simulate(http: httpx.AsyncClient, args: argparse.Namespace) -> httpx.Response:
    body: dict[str, Any] = {
        "rules": args.document.get("rules"),
        "since": args.since,
        "examples": args.examples,
    }
    if args.until:
        body["until"] = args.until
    if args.workspace:
        body["workspace"] = args.workspace
    return await http.post("/v1/policies/simulate", json=body)


def _summary(command: str, body: dict[str, Any]) -> str:
    if command == "set":
        return f"stored version {body['version']} of {body['workspace']} ({len(body['rules'])} rules)"
    if command == "simulate":
        lines = [
            f"{body['calls']} calls from {body['since']} to {body['until']}; {body['changed']} would change",
            f"  now:      {json.dumps(body['current'], sort_keys=True)}",
            f"  proposed: {json.dumps(body['proposed'], sort_keys=True)}",
        ]
        lines += [f"  {change}: {count}" for change, count in sorted(body["changes"].items())]
        for example in body["examples"]:
            lines.append(
                f"  e.g. {example['tool_name']} {example['tool_call_id']} at {example['at']}: "
                f"{example['before']} -> {example['after']} (rule {example['rule']})"
            )
        return "\n".join(lines)
    return json.dumps(body, indent=2)


def _run(settings: Settings, args: argparse.Namespace) -> int:
    import httpx

    target = api_target(settings, args)
    if target is None:
        return 2
    base, key = target
    action: Action = args.policy_action

    async def main() -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
            response = await action(http, args)
        body = response.json()
        if response.is_error:
            raise _Refused(str(body.get("code")), str(body.get("detail")), body.get("errors"))
        return dict(body)

    import asyncio

    try:
        body = asyncio.run(main())
    except _Refused as refused:
        print(f"sursis: {refused.code}: {refused.detail}", file=sys.stderr)
        for error in refused.errors or ():
            print(f"  {'.'.join(map(str, error.get('loc', [])))}: {error.get('msg')}", file=sys.stderr)
        return 2
    except httpx.TransportError as error:
        print(f"sursis: cannot reach {base} ({type(error).__name__})", file=sys.stderr)
        return 1
    print(json.dumps(body, indent=2) if args.json else _summary(args.policy_command, body))
    return 0


def add_policy_commands(sub: Any) -> None:
    """Register `sursis policy ...` on the top-level subparsers."""
    policy = sub.add_parser("policy", help="a workspace's approval policy over the HTTP API (admins)")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="the API's base URL (default: SURSIS_API_URL, else http://HOST:PORT)")
    common.add_argument("--key-file", help="a file holding the API key (default: SURSIS_API_KEY)")
    common.add_argument("--workspace", help="the key's workspace by default")
    common.add_argument("--json", action="store_true", help="print the response as JSON")

    get = policy_sub.add_parser("get", parents=[common], help="the current policy (or --version N)")
    get.add_argument("--version", type=int)
    get.set_defaults(func=_run, policy_action=_get)

    put = policy_sub.add_parser("set", parents=[common], help="store a policy document as the next version")
    put.add_argument("document", type=_document, help='a JSON file {"rules": [...]}, or - for stdin')
    put.add_argument("--comment", help="why this version")
    put.add_argument("--expected-version", type=int, help="refuse (409) if the current version is another")
    put.set_defaults(func=_run, policy_action=_set)

    simulate = policy_sub.add_parser(
        "simulate", parents=[common], help="replay a period's calls against a policy document"
    )
    simulate.add_argument("document", type=_document, help='a JSON file {"rules": [...]}, or - for stdin')
    simulate.add_argument("--since", required=True, help="start of the period (ISO 8601 with its zone)")
    simulate.add_argument("--until", help="end of the period (default: now)")
    simulate.add_argument("--examples", type=int, default=10, help="changed calls to show (default 10)")
    simulate.set_defaults(func=_run, policy_action=_simulate)
