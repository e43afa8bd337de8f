"""A restart without the audit signing key, on a database whose chains carry signed checkpoints.

Before: the process started without a word and sealed the new rows unsigned, so the newest rows
could later be deleted with nothing signed to tell. Now a process that seals (the worker, `serve`
with its in-process worker, `audit verify --seal`) refuses to start, in one line; one that only
reads (`serve --no-worker`, `audit verify`) still runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.cli import run
from sursis.app.main import create_app
from sursis.app.settings import Settings
from sursis.app.storage import build_audit_chain, build_unit_of_work
from sursis.domain.audit.audit_checkpoint import AuditSigningKeyRequired
from sursis.infra.db.engine import create_engine
from sursis.infra.encryption.signing import write_signing_key
from tests.conftest import make_settings
from tests.integration.test_audit_chain import write_rows


async def sursis(argv: list[str], settings: Settings) -> int:
    return await asyncio.to_thread(run, argv, settings)


async def signed_database(database_url: str, tmp_path: Path) -> Settings:
    """A database with 3 sealed, signed rows and 2 written since; the settings that signed them."""
    key = tmp_path / "audit-signing.pem"
    write_signing_key(key)
    settings = make_settings(database_url, audit_signing_key_file=key)
    engine = create_engine(database_url)
    try:
        await write_rows(engine, "alpha", 3)
        await build_audit_chain(settings.storage, build_unit_of_work(settings.storage, engine)).seal_all()
        await write_rows(engine, "alpha", 2)
    finally:
        await engine.dispose()
    return settings


async def sealed_rows(database_url: str) -> int:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            query = "SELECT count(*) FROM audit_log WHERE seq IS NOT NULL"
            return int((await conn.execute(sa.text(query))).scalar_one())
    finally:
        await engine.dispose()


async def test_a_process_that_seals_without_the_key_is_refused_at_start(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signed = await signed_database(database_url, tmp_path)
    keyless = signed.model_copy(update={"audit_signing_key_file": None})
    for command in (["worker"], ["serve", "--port", "1"], ["audit", "verify", "--seal"]):
        assert await sursis(command, keyless) == 2, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "SURSIS_AUDIT_SIGNING_KEY_FILE" in err, err
        assert "signed checkpoints" in err
    with pytest.RaisesGroup(
        pytest.RaisesExc(AuditSigningKeyRequired, match="signed checkpoints"), flatten_subgroups=True
    ):
        async with AsyncTestClient(app=create_app(keyless.model_copy(update={"run_worker": True}))):
            pass
    engine = create_engine(database_url)
    try:
        chain = build_audit_chain(keyless.storage, build_unit_of_work(keyless.storage, engine))
        with pytest.raises(AuditSigningKeyRequired):
            await chain.seal_all()
    finally:
        await engine.dispose()
    assert await sealed_rows(database_url) == 3  # nothing was sealed unsigned

    # reading needs no private key; with the key, the worker starts and signs again
    assert await sursis(["audit", "verify", "--workspace", "alpha"], keyless) == 0
    async with AsyncTestClient(app=create_app(keyless.model_copy(update={"run_worker": False}))):
        pass
    assert await sursis(["audit", "verify", "--seal", "--workspace", "alpha"], signed) == 0
    assert await sealed_rows(database_url) == 5


async def test_a_database_without_checkpoints_starts_without_a_key(database_url: str) -> None:
    settings = make_settings(database_url)
    engine = create_engine(database_url)
    try:
        await write_rows(engine, "alpha", 2)
    finally:
        await engine.dispose()
    assert await sursis(["audit", "verify", "--seal"], settings) == 0
    async with AsyncTestClient(app=create_app(settings.model_copy(update={"run_worker": True}))):
        pass
