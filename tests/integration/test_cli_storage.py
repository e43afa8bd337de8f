"""Every command of the command line that touches storage is built by the composition root: with
a keyring set, what each one writes is sealed like what the API writes. The test runs them all and
then looks at the database as a thief would: a `pg_dump` (PostgreSQL) or the file's bytes (SQLite)
holds no marker, and no encrypted column holds a plaintext value."""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from sursis.app.cli import parser, run
from sursis.app.settings import Settings
from sursis.app.storage import build_cipher
from sursis.infra.db.engine import create_engine
from sursis.infra.db.rotation import PLAINTEXT_KEY, key_counts
from tests.api.test_encryption_at_rest import new_key
from tests.conftest import make_settings

MARKER = "cobalt-wren-5521"
"""Written only into content columns (a hold's reason); must appear nowhere in the stored bytes."""

NOT_STORAGE = {
    "serve": "runs the API: built by the same container (covered by the API's encryption tests)",
    "worker": "runs the worker: the same container",
    "wait-ready": "an HTTP client of /readyz",
    "login": "signs a person in at the identity provider; writes only the user's credentials file",
    "pending list": "an HTTP client of the API",
    "pending show": "an HTTP client of the API",
    "pending approve": "an HTTP client of the API",
    "pending deny": "an HTTP client of the API",
    "pending revise": "an HTTP client of the API",
    "pending answer": "an HTTP client of the API",
    "pending reassign": "an HTTP client of the API",
    "policy get": "an HTTP client of the API",
    "policy set": "an HTTP client of the API",
    "policy simulate": "an HTTP client of the API",
    "groups list": "an HTTP client of the API",
    "groups show": "an HTTP client of the API",
    "groups create": "an HTTP client of the API",
    "groups add": "an HTTP client of the API",
    "groups remove": "an HTTP client of the API",
    "groups delete": "an HTTP client of the API",
    "delegations create": "an HTTP client of the API",
    "delegations list": "an HTTP client of the API",
    "delegations revoke": "an HTTP client of the API",
    "provisioning list": "an HTTP client of the API",
    "provisioning set": "an HTTP client of the API",
    "provisioning remove": "an HTTP client of the API",
    "mcp pins": "an HTTP client of the API",
    "mcp accept": "an HTTP client of the API",
    "conversations fork": "an HTTP client of the API",
}


def commands(p: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*prefix, name))
            return
    yield " ".join(prefix)


def libpq(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def stored_bytes(url: str) -> bytes:
    if url.startswith("sqlite"):
        path = Path(sa.make_url(url).database or "")
        return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
    assert shutil.which("pg_dump"), "pg_dump (PostgreSQL's client) must be on PATH for this test"
    done = await asyncio.to_thread(
        subprocess.run, ["pg_dump", "--format=plain", libpq(url)], capture_output=True, check=True
    )
    return done.stdout


async def test_every_command_seals_what_it_writes(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signing_key = tmp_path / "audit-signing.pem"
    settings = make_settings(
        database_url, encryption_keys=new_key("cli-1"), audit_signing_key_file=str(signing_key)
    )
    ran: set[str] = set()

    async def sursis(*argv: str, expect: int = 0, using: Settings = settings) -> str:
        code = await asyncio.to_thread(run, list(argv), using)
        out = capsys.readouterr()
        assert code == expect, (argv, out.out, out.err)
        ran.add(" ".join(a for a in argv[:2] if not a.startswith("-")))
        return out.out

    await sursis("audit", "keygen", str(signing_key))
    await sursis("migrate")
    await sursis("db-check")
    created = await sursis(
        "keys", "create", "--role", "operator", "--workspace", "default", "--name", "console"
    )
    key_id = re.search(r"id ([0-9a-f-]{36})", created)
    assert key_id is not None
    await sursis("keys", "list")
    await sursis("keys", "revoke", key_id.group(1))
    await sursis("demo", "seed", "--workspace", "default")
    await sursis(
        "retention", "set", "--workspace", "default", "--conversation-days", "30", "--audit-days", "60"
    )
    await sursis("retention", "get", "--workspace", "default")
    held = await sursis("retention", "hold", "--workspace", "default", "--reason", f"litigation {MARKER}")
    hold_id = re.search(r"legal hold ([0-9a-f-]{36})", held)
    assert hold_id is not None
    assert MARKER in await sursis("retention", "holds")
    await sursis("retention", "release", hold_id.group(1))
    await sursis("retention", "hold", "--workspace", "default", "--reason", f"audit {MARKER}")
    await sursis("retention", "plan")
    await sursis("retention", "run")
    assert "ok  workspace default" in await sursis("audit", "verify", "--seal")
    await sursis("audit", "checkpoint")
    status = await sursis("encryption", "status", "--columns")
    assert "encryption: on" in status and "active key: cli-1" in status
    await sursis("encryption", "rotate", "--quiet")
    assert "nothing to seal" in await sursis("encryption", "seal-existing")
    await sursis("encryption", "compact")
    assert "ok  workspace default" in await sursis("audit", "verify")
    assert "wrote" in await sursis("audit", "export", "--workspace", "default", "--out", str(tmp_path / "b"))

    assert ran | set(NOT_STORAGE) == set(commands(parser())), "a new command: run it here"
    assert MARKER.encode() not in await stored_bytes(database_url)
    engine = create_engine(database_url)
    try:
        counts = await key_counts(engine, build_cipher(settings.storage))
    finally:
        await engine.dispose()
    plaintext = {f"{c.table}.{c.column}": c.by_key[PLAINTEXT_KEY] for c in counts if c.by_key[PLAINTEXT_KEY]}
    assert plaintext == {}
    sealed = {f"{c.table}.{c.column}": c.by_key["cli-1"] for c in counts if c.by_key.get("cli-1")}
    assert {"audit_log.details", "dead_letters.payload", "legal_holds.reason"} <= set(sealed), sealed
