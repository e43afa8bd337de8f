"""`sursis mcp pins | accept`: what MCP servers said about their tools, and accepting a change.

Like `sursis policy`, an HTTP client of a running service acting as the key it sends (an admin's:
`SURSIS_API_KEY` or `--key-file`), so the checks and the audit row are those of `/v1/mcp/pins`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from sursis.app.cli.http import api_target

if TYPE_CHECKING:
    from sursis.app.settings import Settings


def _pins_text(pins: list[dict[str, Any]], changed: bool) -> str:
    if not pins:
        return "no MCP tool changed since it was accepted" if changed else "no MCP tool pinned"
    lines = []
    for pin in pins:
        state = f"CHANGED to {pin['changed_digest']}" if pin["changed"] else "as accepted"
        lines.append(
            f"{pin['agent']}/{pin['tool']} (server {pin['server']}): {pin['digest']} "
            f"accepted by {pin['accepted_by']}; {state}"
        )
        if pin["changed"]:
            was, now = pin["description"], pin["changed_description"] or {}
            for key in sorted(set(was) | set(now)):
                if was.get(key) != now.get(key):
                    lines.append(f"  {key}: {json.dumps(was.get(key))} -> {json.dumps(now.get(key))}")
    return "\n".join(lines)


def _run(settings: Settings, args: argparse.Namespace) -> int:
    import httpx

    target = api_target(settings, args)
    if target is None:
        return 2
    base, key = target

    async def main() -> httpx.Response:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
            if args.mcp_command == "accept":
                path = f"/v1/mcp/pins/{args.agent}/{args.tool}/accept"
                return await http.post(path, json={"digest": args.digest})
            return await http.get("/v1/mcp/pins", params={"changed": "true" if args.changed else "false"})

    import asyncio

    try:
        response = asyncio.run(main())
    except httpx.TransportError as error:
        print(f"sursis: cannot reach {base} ({type(error).__name__})", file=sys.stderr)
        return 1
    body = response.json()
    if response.is_error:
        print(f"sursis: {body.get('code')}: {body.get('detail')}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(body, indent=2))
    elif args.mcp_command == "accept":
        print(f"accepted {body['agent']}/{body['tool']} as {body['digest']}")
    else:
        print(_pins_text(body, args.changed))
    return 0


def add_mcp_commands(sub: Any) -> None:
    """Register `sursis mcp ...` on the top-level subparsers."""
    mcp = sub.add_parser("mcp", help="what MCP servers said about their tools (admins)")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="the API's base URL (default: SURSIS_API_URL, else http://HOST:PORT)")
    common.add_argument("--key-file", help="a file holding the API key (default: SURSIS_API_KEY)")
    common.add_argument("--json", action="store_true", help="print the response as JSON")

    pins = mcp_sub.add_parser("pins", parents=[common], help="each MCP tool's accepted description")
    pins.add_argument("--changed", action="store_true", help="only tools a server describes otherwise now")
    pins.set_defaults(func=_run)

    accept = mcp_sub.add_parser(
        "accept", parents=[common], help="accept a tool's changed description (its calls follow it again)"
    )
    accept.add_argument("agent")
    accept.add_argument("tool")
    accept.add_argument("digest", help="the changed digest `sursis mcp pins --changed` shows")
    accept.set_defaults(func=_run)
