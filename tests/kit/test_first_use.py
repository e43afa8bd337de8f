"""The kit and the embedded service as a new user meets them: a project with no pytest-asyncio
settings, a script that calls a tool the agent does not have, and a host program that never
configured logging."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.kit.test_docs_example import REPO

WRONG_TOOL = (
    (REPO / "tests" / "kit" / "test_refund_example.py")
    .read_text()
    .replace('scripted_model.call("refund"', 'scripted_model.call("refnud"')
)

EMBEDDED = """
import asyncio

from sursis import Service


async def main() -> None:
    async with Service.open("sqlite+aiosqlite:///./app.db", model="scripted", migrate=True) as svc:
        conversation = await svc.start_conversation("ops")
        await svc.send(conversation.id, "hello")
        await svc.run_until_idle()


asyncio.run(main())
"""


def test_a_failing_kit_test_says_what_the_run_did_and_the_kit_warns_nothing(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # no asyncio_mode, no loop scope
    (tmp_path / "test_user.py").write_text(WRONG_TOOL)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "found 0; awaiting: []" in out
    assert "status completed, error None, last model text 'Refunded A1.'" in out
    assert "pytest-asyncio" not in out
    assert "not natively supported" not in out
    assert "warning" not in out.lower()


def test_an_embedded_service_prints_nothing_unless_the_host_configures_logging(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(EMBEDDED)
    done = subprocess.run(
        [sys.executable, "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")
    configured = EMBEDDED.replace(
        "import asyncio", "import asyncio\nimport logging\nlogging.basicConfig(level=logging.INFO)"
    )
    (tmp_path / "logged.py").write_text(configured)
    done = subprocess.run(
        [sys.executable, "logged.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert "run.completed" in done.stderr
