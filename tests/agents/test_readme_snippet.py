"""README's "Serve your own agent": the snippet, saved as `my_agents.py`, served as the README's
`sursis serve --agents` line says, and one approval turn over HTTP."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

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
    assert len([line for line in SNIPPET.group(1).splitlines() if line.strip()]) <= 10


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


def test_the_agents_guide_shows_the_examples_tool_options_verbatim() -> None:
    repo = Path(__file__).resolve().parents[2]
    source = (repo / "examples" / "support-desk" / "support_desk" / "agents.py").read_text()
    block = source[source.index("AGENTS = [") :]
    assert f"```python\n{block}```" in (repo / "docs" / "agents.md").read_text()
