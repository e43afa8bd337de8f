"""The service installed on the `mcp` 1.x SDK (FastMCP 3), the range pydantic-ai's own `mcp` extra
accepts: a team's server written for mcp 1.x (`mcp.server.fastmcp`) runs from the service's own
python, a read call and an approved write call. Skipped where the service runs on mcp 2 (the `dev`
venv); run in a venv holding `mcp<2` and `fastmcp-slim<4` (docs/agents-mcp.md, "MCP servers")."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from pydantic_ai import Agent

from sursis import Service, adopt
from sursis.testing import ScriptedModel, expect_pending, settle

SERVER = Path(__file__).with_name("mcp") / "notes_server_v1.py"

pytestmark = pytest.mark.skipif(
    not importlib.metadata.version("mcp").startswith("1."), reason="the service runs on mcp 2 here"
)


async def test_an_mcp_1_server_beside_the_service_on_mcp_1(database_url: str, tmp_path: Path) -> None:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    notes_file = tmp_path / "notes.txt"
    transport = StdioTransport(sys.executable, [str(SERVER)], env={"NOTES_FILE": str(notes_file)})
    agent = Agent(name="notes", instructions="Keep notes.", toolsets=[MCPToolset(transport, id="notes")])
    model = ScriptedModel().calls(("sdk_version", {}), ("write_note", {"text": "hello"})).text("Noted.")
    async with Service.open(database_url, agents=[adopt(agent)], model=model.model) as svc:
        conversation = await svc.start_conversation("notes")
        run = await svc.send(conversation.id, "note hello")
        [asked] = await expect_pending(svc, tool_name="write_note")
        assert not notes_file.exists()
        await svc.resolve(asked.correlation_id, "approve")
        view = await settle(svc, run.id)
    assert (view.run.status, view.run.output) == ("completed", "Noted."), view.run.error
    assert notes_file.read_text() == "hello\n"
    told = [
        str(part.content)
        for request in model.requests
        for message in request
        for part in getattr(message, "parts", [])
        if getattr(part, "tool_name", None) == "sdk_version" and part.part_kind == "tool-return"
    ]
    assert told and told[0].startswith("1."), told
