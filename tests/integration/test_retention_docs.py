"""docs/retention.md's examples run: its commands against a migrated database, its declarations
as code; `sursis audit verify` exits 1 on a breach and names it."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

import pytest
import sqlalchemy as sa

from sursis.app.cli import run
from sursis.domain.clock import utcnow
from sursis.domain.records import AuditEntry
from sursis.domain.tools import ContextRetention, ToolSpec
from sursis.infra.db.engine import create_engine
from sursis.infra.db.migrations import upgrade
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from tests.conftest import make_settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "retention.md"


def block_after(marker: str, language: str = "") -> str:
    text = DOC.read_text()
    found = re.search(re.escape(marker) + r"\s*```" + language + r"\n(.*?)```", text, re.S)
    assert found is not None, marker
    return found.group(1)


def test_the_commands_of_the_retention_guide_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'docs.db'}"
    upgrade(url)
    settings = make_settings(url)
    lines = [line for line in block_after("<!-- retention-example -->").splitlines() if line.strip()]
    assert len(lines) >= 6
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "sursis"
        assert run(argv[1:], settings) == 0, line
    out = capsys.readouterr().out
    assert "conversations 30 days, audit log 400 days" in out
    assert "legal hold" in out and "ok  workspace default" in out


def test_the_context_retention_declarations_of_the_guide_are_legal() -> None:
    text = DOC.read_text()
    [python] = re.findall(r"```python\n(.*?)```", text, re.S)
    names = {"ToolSpec": ToolSpec, "ContextRetention": ContextRetention}
    specs = [eval(line.split("#")[0], names) for line in python.splitlines() if line.strip()]
    assert [s.context for s in specs] == [
        ContextRetention(age=1),
        ContextRetention(count=2),
        ContextRetention(never_evict=True),
    ]


def test_audit_verify_exits_1_and_names_the_breach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'verify.db'}"
    upgrade(url)
    settings = make_settings(url)

    async def write(statements: list[str]) -> None:
        engine = create_engine(url)
        try:
            async with SqlUnitOfWorkFactory(engine)() as uow:
                for n in range(3):
                    await uow.audit.append(
                        AuditEntry("test.step", "cli", "default", details={"n": n}), utcnow()
                    )
                await uow.commit()
            async with engine.begin() as conn:
                for statement in statements:
                    await conn.execute(sa.text(statement))
        finally:
            await engine.dispose()

    asyncio.run(write([]))
    assert run(["audit", "verify", "--seal"], settings) == 0
    asyncio.run(
        write(
            [
                "DROP TRIGGER audit_log_no_update",
                "UPDATE audit_log SET details = '{\"n\": 7}' WHERE seq = 2",
            ]
        )
    )
    assert run(["audit", "verify"], settings) == 1
    out = capsys.readouterr().out
    assert "BROKEN  workspace default" in out and "first breach: edited at seq 2" in out
