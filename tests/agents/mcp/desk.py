"""The desk MCP server as the tests start it (stdio or streamable HTTP), and what it received."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

SERVER = Path(__file__).with_name("desk_server.py")


def stdio_desk(calls: Path, server_id: str = "desk", variant: str = "1") -> MCPToolset[Any]:
    """The desk over stdio; each server process appends what it receives to `calls`. `variant` "2"
    describes its destructive tool differently, "flip" says it only reads."""
    env = {"DESK_CALLS": str(calls), "DESK_VARIANT": variant}
    return MCPToolset(StdioTransport(sys.executable, [str(SERVER)], env=env), id=server_id)


def desk_agent(toolset: MCPToolset[Any], name: str = "desk") -> Agent[None, str]:
    return Agent(name=name, instructions="Help with support tickets.", toolsets=[toolset])


def received(calls: Path, tool: str | None = None) -> list[dict[str, Any]]:
    """What the server received, in order (of `tool` only when given)."""
    if not calls.exists():
        return []
    lines = [json.loads(line) for line in calls.read_text().splitlines() if line.strip()]
    return [line for line in lines if tool is None or line["tool"] == tool]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def http_desk(calls: Path) -> Iterator[str]:
    """The desk over streamable HTTP on a free local port; yields its URL."""
    port = free_port()
    env = {**os.environ, "DESK_CALLS": str(calls)}
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the desk MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()


FLAKY = Path(__file__).with_name("flaky_server.py")


def stdio_flaky(calls: Path, mode: str = "", command: str | None = None) -> MCPToolset[Any]:
    """The flaky ledger over stdio (`mode`: "", "die_at_start" or "die_mid_call"); `command` runs
    it with another program (a missing one, or another environment's python)."""
    env = {"FLAKY_CALLS": str(calls), "FLAKY_MODE": mode}
    return MCPToolset(StdioTransport(command or sys.executable, [str(FLAKY)], env=env), id="ledger")


def bank_agent(*toolsets: MCPToolset[Any]) -> Agent[None, str]:
    """An agent with two MCP servers and a tool of its own (`note`, read-only)."""
    agent = Agent(name="bank", instructions="Help with accounts and tickets.", toolsets=list(toolsets))

    @agent.tool_plain
    def note(text: str) -> str:
        """Write a note."""
        return f"noted: {text}"

    return agent
