"""README's "Serve your own agent": the snippet, saved as `my_agents.py`, served as the README's
`sursis serve --agents` line says, and one approval turn over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from sursis.app.cli import parser
from sursis.app.main import create_app
from tests.conftest import admin_headers, make_settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
SNIPPET = re.search(r"```python\n(# my_agents\.py\n.*?)```", README, re.DOTALL)
SERVE = re.search(r"^(sursis serve --agents \S+)", README, re.MULTILINE)


def test_the_snippet_is_ten_lines() -> None:
    assert SNIPPET and SERVE
    # Ten lines, and three more for the model a tool returns.
    assert len([line for line in SNIPPET.group(1).splitlines() if line.strip()]) <= 13


async def test_the_snippet_is_served_and_its_gated_tool_waits_for_approval(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SNIPPET and SERVE
    (tmp_path / "my_agents.py").write_text(SNIPPET.group(1))
    monkeypatch.syspath_prepend(str(tmp_path))
    args = parser().parse_args(shlex.split(SERVE.group(1))[1:])
    settings = make_settings(database_url, agents=args.agents)
    steps = [
        [{"tool": "lookup_order", "args": {"order_id": "A1"}}],
        [{"tool": "refund", "args": {"order_id": "A1", "amount": 5}}],
        "Refunded.",
    ]
    async with AsyncTestClient(app=create_app(settings)) as http:
        http.headers.update(await admin_headers(database_url))
        assert [a["name"] for a in (await http.get("/v1/agents")).json()] == ["desk"]
        conversation = (await http.post("/v1/conversations", json={"agent": "desk"})).json()
        content = f"refund A1\nSCRIPT: {json.dumps(steps)}"
        run: dict[str, Any] = (
            await http.post(
                f"/v1/conversations/{conversation['id']}/messages",
                params={"wait": 20},
                json={"content": content},
            )
        ).json()
        assert run["status"] == "suspended", run
        [pending] = run["pending"]
        assert pending["tool_name"] == "refund"
        resolved = await http.post(
            f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert resolved.status_code == 200
        done = (await http.get(f"/v1/runs/{run['id']}", params={"wait": 20})).json()
        assert (done["status"], done["output"]) == ("completed", "Refunded.")
        calls = (await http.get(f"/v1/runs/{run['id']}/tool-calls")).json()
        # The model a tool returned, as pydantic-ai sends it to the model.
        [lookup] = [c for c in calls if c["tool_name"] == "lookup_order"]
        assert lookup["result"] == {"ok": True, "result": {"order_id": "A1", "total": 40.0}}


def test_the_agents_guide_shows_the_examples_tool_options_verbatim() -> None:
    repo = Path(__file__).resolve().parents[2]
    source = (repo / "examples" / "support-desk" / "support_desk" / "agents.py").read_text()
    block = source[source.index("AGENTS = [") :]
    assert f"```python\n{block}```" in (repo / "docs" / "agents.md").read_text()


def test_the_readme_command_runs_as_written_from_the_folder_that_holds_the_file(tmp_path: Path) -> None:
    """The README's line itself, in a shell in the folder of `my_agents.py`: nothing on PYTHONPATH."""
    assert SNIPPET and SERVE
    (tmp_path / "my_agents.py").write_text(SNIPPET.group(1))
    port = _free_port()
    key_file = tmp_path / "admin.key"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SURSIS_", "PYTHON"))}
    env.update(
        {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "SURSIS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}",
            "SURSIS_PORT": str(port),
            "SURSIS_ADMIN_KEY_FILE": str(key_file),
        }
    )
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        # A session of its own: the shell does not pass a signal on to `sursis`, its process group does.
        server = subprocess.Popen(
            SERVE.group(1),
            shell=True,
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        headers = {"Authorization": f"Bearer {key_file.read_text().strip()}"}
        agents = httpx.get(f"{base}/v1/agents", headers=headers).json()
        assert [a["name"] for a in agents] == ["desk"]
        assert {t["name"]: t["approval"] for t in agents[0]["tools"]} == {
            "lookup_order": "auto",
            "refund": "requires_approval",
        }
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
    assert "agents: desk" in log.read_text()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_agents_guide_shows_the_deps_factory_of_the_adopted_package_verbatim() -> None:
    """The guide's deps factory is the one `tests/adoption` installs and serves."""
    repo = Path(__file__).resolve().parents[2]
    source = (repo / "tests/adoption/packages/orders-desk/orders_desk/agents.py").read_text()
    block = source[source.index("@asynccontextmanager") :]
    assert f"```python\n{block}```" in (repo / "docs" / "agents.md").read_text()
