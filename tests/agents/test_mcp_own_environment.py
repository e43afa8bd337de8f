"""A stdio MCP server run from its own environment: an `mcp` 1.x server (as `mcp-server-sqlite` and
most servers on PyPI are) in a venv of its own, started by that venv's python beside the service's
`mcp` 2.x, for a server whose dependencies should not share the service's environment (installed in
it, the service runs on `mcp` 1.x too: tests/agents/test_mcp_one_sdk.py). The venv is made once and
kept in pytest's cache."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

from sursis.infra.agents.adopted import adopt
from sursis.testing import ScriptedModel, expect_pending, settle
from tests.agents.test_mcp_servers import served
from tests.conftest import KeyMaker

SERVER = Path(__file__).with_name("mcp") / "notes_server_v1.py"


@pytest.fixture(scope="session")
def mcp1_python(pytestconfig: pytest.Config) -> Path:
    """The python of a venv holding `mcp<2`, made once (pip reaches the package index or its cache)."""
    root = pytestconfig.cache.mkdir("mcp1-server-venv") / "venv"
    python = root / "bin" / "python"
    if not (root / "installed").exists():
        building = root.with_name(f"building-{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        subprocess.run([sys.executable, "-m", "venv", str(building)], check=True, env=env)
        pip = [str(building / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "mcp<2"], check=True, env=env, timeout=600, capture_output=True)
        (building / "installed").write_text("mcp<2\n")
        try:
            building.rename(root)  # a session running beside this one may have won: keep its venv
        except OSError:
            shutil.rmtree(building, ignore_errors=True)
    return python


async def test_an_mcp_1_server_from_its_own_venv_beside_the_services_mcp_2(
    database_url: str, keys: KeyMaker, tmp_path: Path, mcp1_python: Path
) -> None:
    notes_file = tmp_path / "notes.txt"
    transport = StdioTransport(str(mcp1_python), [str(SERVER)], env={"NOTES_FILE": str(notes_file)})
    agent = Agent(name="notes", instructions="Keep notes.", toolsets=[MCPToolset(transport, id="notes")])
    model = ScriptedModel().calls(("sdk_version", {}), ("write_note", {"text": "hello"})).text("Noted.")
    async with served(database_url, adopt(agent), model, keys) as (svc, _):
        conversation = await svc.start_conversation("notes")
        run = await svc.send(conversation.id, "note hello")
        [asked] = await expect_pending(svc, tool_name="write_note")
        assert not notes_file.exists()
        await svc.resolve(asked.correlation_id, "approve")
        view = await settle(svc, run.id)
        assert (view.run.status, view.run.output) == ("completed", "Noted.")
    assert notes_file.read_text() == "hello\n"
    told = str([m.parts for m in model.requests[-1]])
    assert "noted 'hello'" in told
    [server_sdk] = {
        str(part.content)
        for request in model.requests
        for message in request
        for part in getattr(message, "parts", [])
        if getattr(part, "tool_name", None) == "sdk_version" and part.part_kind == "tool-return"
    }
    assert server_sdk.startswith("1."), server_sdk
    assert importlib.metadata.version("mcp").startswith("2.")
