"""The plugin in a user's own pytest run: the example test, copied out of the project, on a fresh
PostgreSQL database given by `--sursis-db`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from sursis.infra.db.engine import create_engine
from tests.conftest import PG_URL
from tests.fresh_database import drop_database, fresh_database

EXAMPLE = Path(__file__).with_name("test_refund_example.py")
USER_CONFIG = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
filterwarnings = error
"""


async def test_a_users_suite_runs_the_example_on_postgresql(tmp_path: Path) -> None:
    (tmp_path / "test_refund.py").write_text(EXAMPLE.read_text())
    (tmp_path / "pytest.ini").write_text(USER_CONFIG)
    url = await fresh_database(PG_URL, "kit")
    try:
        finished = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--sursis-db", url, "-v"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        left = await _agents_of_conversations(url)
    finally:
        await drop_database(url)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert left == ["support"], "the test ran on the database given"
    assert "test_refund.py::test_a_refund_waits_for_approval PASSED" in finished.stdout


async def _agents_of_conversations(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(sa.text("SELECT agent FROM conversations"))).scalars())
    finally:
        await engine.dispose()
