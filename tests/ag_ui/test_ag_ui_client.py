"""The real `@ag-ui/client` (npm) drives a hosted agent over HTTP through an interrupt and a resume.

`npm ci` in tests/ag_ui/node installs it (`.ci/run` does); the app is served on a loopback port.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from tests.ag_ui.helpers import REPLAY
from tests.api.live import serve
from tests.conftest import make_settings

NODE_DIR = Path(__file__).parent / "node"


async def drive(base: str, key: str, text: str) -> tuple[int, list[dict[str, Any]], str]:
    node = shutil.which("node")
    assert node, "node is needed (Debian's nodejs)"
    assert (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir(), "run `npm ci` in tests/ag_ui/node"
    process = await asyncio.create_subprocess_exec(
        node,
        "drive.mjs",
        text,
        cwd=NODE_DIR,
        env={"SURSIS_URL": base, "SURSIS_KEY": key, "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    return process.returncode or 0, lines, err.decode()


async def test_the_ag_ui_client_runs_through_an_interrupt_and_resumes_with_an_approval(
    seeded: str, admin_key: IssuedKey
) -> None:
    async with serve(create_app(make_settings(seeded))) as base:
        code, lines, err = await drive(base, admin_key.secret, REPLAY)

    assert code == 0, (lines, err)
    first, second, history = lines
    print(json.dumps(lines, indent=1))
    assert first["outcome"] == "interrupt" and first["error"] is None
    assert [t for t in first["types"] if t.startswith("TOOL_CALL")] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    [interrupt] = first["interrupts"]
    assert (interrupt["reason"], interrupt["expiresAt"] is not None) == ("tool_call", True)
    assert second["outcome"] == "success" and second["result"] == "replayed", second
    assert "TOOL_CALL_RESULT" in second["types"]
    assert {"role": "assistant", "content": "replayed"} in history["messages"]
