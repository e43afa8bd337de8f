"""`sursis encryption status | rotate` as docs/runbooks/encryption.md shows them: every command of
the runbook runs here, against a migrated SQLite database holding plaintext and sealed values."""

from __future__ import annotations

import asyncio
import base64
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from sursis.app.cli import parser, run
from sursis.domain.clock import utcnow
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.encryption import AesGcmCipher, LocalKeyring
from tests.conftest import make_settings

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbooks" / "encryption.md"


def runbook_commands(prefix: str) -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", RUNBOOK.read_text(), re.S)
    return [
        line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith(prefix)
    ]


def make_key(key_id: str) -> str:
    [line] = runbook_commands("python -c")
    code = re.search(r'"(.*)"', line)
    assert code is not None
    made = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, check=True)
    return made.stdout.strip().replace("2026-11", key_id, 1)


async def write_messages(url: str, keys: str | None, bodies: list[str]) -> None:
    import uuid

    from sursis.domain.records import Conversation

    engine = create_engine(url)
    cipher = AesGcmCipher(LocalKeyring.parse(keys or ""))
    try:
        async with SqlUnitOfWorkFactory(engine, cipher=cipher)() as uow:
            now = utcnow()
            cid = uuid.uuid4()
            await uow.conversations.add(
                Conversation(
                    id=cid,
                    workspace="default",
                    agent="ops",
                    status="idle",
                    active_run_id=None,
                    created_at=now,
                    updated_at=now,
                )
            )
            await uow.messages.append(cid, None, bodies, now)
            await uow.commit()
    finally:
        await engine.dispose()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_the_runbook_commands_report_and_rotate(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = runbook_commands("sursis encryption")
    assert {c.split()[2] for c in commands} == {"status", "rotate", "compact"}
    old, new = make_key("old-1"), make_key("new-2")
    assert LocalKeyring.parse(old).active_key_id == "old-1"
    await write_messages(database_url, None, ['{"written": "before encryption"}'])
    await write_messages(database_url, old, ['{"under": "the old key"}'] * 3)

    rotating = make_settings(database_url, encryption_keys=f"{new},{old}")
    assert await asyncio.to_thread(run, ["encryption", "status"], rotating) == 0
    shown = capsys.readouterr().out
    assert re.search(r"old-1\s+3\b", shown) and re.search(r"\(plaintext\)\s+1\b", shown), shown
    for command in commands:
        argv = command.split()[1:]
        parser().parse_args(argv)
        assert await asyncio.to_thread(run, argv, rotating) == 0, command
    shown = capsys.readouterr().out
    assert "rewrote 3 rows" in shown and "0 rows still" in shown  # plaintext is not rotate's
    assert "1 rows hold values in plaintext, left as they are" in shown
    assert await asyncio.to_thread(run, ["encryption", "seal-existing", "--yes"], rotating) == 0
    assert "sealed 1 values under new-2" in capsys.readouterr().out
    assert await asyncio.to_thread(run, ["encryption", "status"], rotating) == 0
    assert "no value is under old-1: safe to remove" in capsys.readouterr().out
    retired = make_settings(database_url, encryption_keys=new)
    assert await asyncio.to_thread(run, ["encryption", "status", "--columns"], retired) == 0
    assert re.search(r"messages\.body: new-2=4\b", capsys.readouterr().out)


def test_rotate_refuses_without_a_keyring_and_a_bad_keyring_is_a_clean_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["encryption", "rotate"], make_settings("sqlite+aiosqlite:///unused.db")) == 2
    assert "encryption is off" in capsys.readouterr().err
    short = base64.b64encode(b"sixteen byte key").decode()
    settings = make_settings("sqlite+aiosqlite:///unused.db", encryption_keys=f"k1:{short}")
    for command in (["encryption", "status"], ["serve"], ["worker"]):
        assert run(command, settings) == 2, command
        err = capsys.readouterr().err
        assert "must be 32 bytes, not 16" in err and short not in err


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_the_runbook_signs_and_verifies_the_audit_chain(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.integration.test_audit_chain import write_rows

    commands = runbook_commands("sursis audit")
    assert [c.split()[2] for c in commands] == ["keygen", "checkpoint", "verify"]
    engine = create_engine(database_url)
    try:
        await write_rows(engine, "default", 3)
    finally:
        await engine.dispose()
    monkeypatch.chdir(tmp_path)
    settings = make_settings(database_url, audit_signing_key_file="audit-signing.pem")
    for command in commands:
        assert await asyncio.to_thread(run, command.split()[1:], settings) == 0, command
    out = capsys.readouterr().out
    assert "BEGIN PUBLIC KEY" in out and "ok  workspace default" in out
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            signed = (await conn.execute(sa.text("SELECT workspace, seq FROM audit_checkpoints"))).all()
    finally:
        await engine.dispose()
    assert [tuple(row) for row in signed] == [("default", 3)]
    assert (tmp_path / "audit-signing.pem").stat().st_mode & 0o077 == 0
