"""The newest audit rows cut off by an insider with SQL rights.

The attack: keep a copy of `audit_checkpoints` and `audit_chain_heads`; later, with the append-only
guard lifted, delete every row after the copied head and put both copies back. The database then
holds an older, consistent, signed state: its own checkpoint cannot tell. The signed checkpoints
appended outside the database (`SURSIS_AUDIT_CHECKPOINT_DIR`) can: `sursis audit verify` and
`GET /v1/audit/verify` fail and name the missing sequence numbers, and the sealer refuses to sign
new heads on top of the put-back checkpoint.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.app.cli import run
from sursis.app.main import create_app
from sursis.app.settings import Settings
from sursis.app.storage import build_audit_chain, build_unit_of_work
from sursis.domain.audit.audit_chain import Breach
from sursis.domain.retention.audit_verify import AuditChainService
from sursis.infra.db.engine import create_engine
from sursis.infra.encryption.signing import write_signing_key
from tests.conftest import admin_headers, make_settings
from tests.integration.test_audit_chain import sql, write_rows

TABLES = ("audit_checkpoints", "audit_chain_heads")


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    key = tmp_path / "audit-signing.pem"
    write_signing_key(key)
    return make_settings(
        database_url,
        audit_signing_key_file=key,
        audit_checkpoint_dir=tmp_path / "checkpoints",
        run_worker=False,
    )


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


def chain_for(settings: Settings, engine: AsyncEngine) -> AuditChainService:
    """The audit chain service as every process builds it (signing key, external log)."""
    return build_audit_chain(settings.storage, build_unit_of_work(settings.storage, engine))


async def copy_rows(engine: AsyncEngine, workspace: str) -> dict[str, dict[str, Any]]:
    async with engine.connect() as conn:
        return {
            table: dict(
                (await conn.execute(sa.text(f"SELECT * FROM {table} WHERE workspace = :w"), {"w": workspace}))
                .one()
                ._mapping
            )
            for table in TABLES
        }


async def cut_tail_and_put_back(
    engine: AsyncEngine, workspace: str, copied: dict[str, dict[str, Any]]
) -> None:
    """The insider: delete the rows after the copied head (guard lifted), restore both copies."""
    through = copied["audit_chain_heads"]["seq"]
    await sql(engine, "DELETE FROM audit_log WHERE workspace = :w AND seq > :s", w=workspace, s=through)
    async with engine.begin() as conn:
        for table, row in copied.items():
            await conn.execute(sa.text(f"DELETE FROM {table} WHERE workspace = :w"), {"w": workspace})
            columns = ", ".join(row)
            await conn.execute(
                sa.text(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(':' + c for c in row)})"), row
            )


async def command(argv: list[str], settings: Settings) -> int:
    return await asyncio.to_thread(run, argv, settings)


async def test_a_cut_tail_put_back_with_its_old_checkpoint_fails_against_the_external_one(
    settings: Settings, engine: AsyncEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = chain_for(settings, engine)
    await write_rows(engine, "alpha", 5)
    await chain.seal_all()
    copied = await copy_rows(engine, "alpha")
    await write_rows(engine, "alpha", 4)
    await chain.seal_all()
    [whole] = await chain.verify("alpha")
    assert whole.ok and whole.head_seq == 9, whole.finding
    lines = (settings.audit_checkpoint_dir / "alpha.jsonl").read_text().splitlines()  # type: ignore[operator]
    assert [json.loads(line)["seq"] for line in lines] == [5, 9]

    await cut_tail_and_put_back(engine, "alpha", copied)
    inside_only = settings.model_copy(update={"audit_checkpoint_dir": None})
    [fooled] = await chain_for(inside_only, engine).verify("alpha")
    assert fooled.ok and fooled.head_seq == 5  # the database alone cannot tell

    [report] = await chain.verify("alpha")
    assert report.finding is not None and report.finding.breach is Breach.DELETED, report
    assert report.finding.seq == 6 and "seq 6 to 9 missing" in report.finding.detail
    assert await command(["audit", "verify", "--workspace", "alpha"], settings) == 1
    out = capsys.readouterr().out
    assert "BROKEN" in out and "deleted at seq 6" in out and "seq 6 to 9 missing" in out, out

    # no new head is signed on top of the put-back checkpoint, however far the chain grows again
    refused: list[str] = []
    chain.on_refused = lambda _, reason: refused.append(reason)
    await write_rows(engine, "alpha", 6)
    await chain.seal_all()
    assert refused and "the external checkpoint is at seq 9" in refused[0], refused
    async with engine.connect() as conn:
        signed = (await conn.execute(sa.text("SELECT seq FROM audit_checkpoints"))).scalar_one()
    assert signed == 5
    [regrown] = await chain.verify("alpha")
    assert regrown.head_seq == 11
    assert regrown.finding is not None and regrown.finding.breach is Breach.EXTERNAL, regrown
    assert regrown.finding.seq == 9


async def test_the_api_names_the_missing_rows_and_takes_expect(
    settings: Settings, engine: AsyncEngine, database_url: str
) -> None:
    chain = chain_for(settings, engine)
    await write_rows(engine, "alpha", 3)
    await chain.seal_all()
    copied = await copy_rows(engine, "alpha")
    recorded = f"3:{copied['audit_chain_heads']['hash']}"
    await write_rows(engine, "alpha", 2)
    await chain.seal_all()
    async with AsyncTestClient(app=create_app(settings)) as client:
        client.headers.update(await admin_headers(database_url))
        query = {"workspace": "alpha", "expect": recorded}
        [held] = (await client.get("/v1/audit/verify", params=query)).json()
        assert held["ok"] and held["head_seq"] == 5, held
        other = {"workspace": "alpha", "expect": "3:" + "0" * 64}
        [wrong] = (await client.get("/v1/audit/verify", params=other)).json()
        assert not wrong["ok"] and wrong["finding"]["breach"] == "expected_head", wrong
        assert wrong["finding"]["seq"] == 3
        for bad in ({"expect": recorded}, {"workspace": "alpha", "expect": "3:xyz"}):
            refused = await client.get("/v1/audit/verify", params=bad)
            assert refused.status_code in (400, 422) and "code" in refused.json(), refused.text

        await cut_tail_and_put_back(engine, "alpha", copied)
        [report] = (await client.get("/v1/audit/verify", params={"workspace": "alpha"})).json()
        assert not report["ok"] and report["head_seq"] == 3, report
        assert report["finding"]["breach"] == "deleted" and report["finding"]["seq"] == 4
        assert "seq 4 to 5 missing" in report["finding"]["detail"]


async def test_a_torn_last_line_is_skipped_and_closed_before_the_next(
    settings: Settings, engine: AsyncEngine
) -> None:
    chain = chain_for(settings, engine)
    await write_rows(engine, "alpha", 2)
    await chain.seal_all()
    path = settings.audit_checkpoint_dir / "alpha.jsonl"  # type: ignore[operator]
    with path.open("ab") as file:
        file.write(b'{"workspace": "alpha", "seq": 7')  # a crash mid-append
    [report] = await chain.verify("alpha")
    assert report.ok, report.finding
    await write_rows(engine, "alpha", 1)
    await chain.seal_all()
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[-1])["seq"] == 3
    [again] = await chain.verify("alpha")
    assert again.ok, again.finding


async def test_a_restore_is_acknowledged_by_the_operator_and_the_file_keeps_the_history(
    settings: Settings, engine: AsyncEngine
) -> None:
    chain = chain_for(settings, engine)
    await write_rows(engine, "alpha", 2)
    await chain.seal_all()
    copied = await copy_rows(engine, "alpha")
    await write_rows(engine, "alpha", 2)
    await chain.seal_all()
    await cut_tail_and_put_back(engine, "alpha", copied)  # as a restore from an older backup would
    [lost] = await chain.verify("alpha")
    assert lost.finding is not None and lost.finding.breach is Breach.DELETED
    [signed] = await chain.checkpoint("alpha")  # `sursis audit checkpoint`: the operator decides
    assert signed.ok
    [report] = await chain.verify("alpha")
    assert report.ok, report.finding
    lines = (settings.audit_checkpoint_dir / "alpha.jsonl").read_text().splitlines()  # type: ignore[operator]
    assert [json.loads(line)["seq"] for line in lines] == [2, 4, 2]


async def test_an_unusable_log_stops_no_sealing_and_is_reported(
    settings: Settings, engine: AsyncEngine, tmp_path: Path
) -> None:
    not_a_directory = tmp_path / "checkpoints-file"
    not_a_directory.write_text("")
    broken = settings.model_copy(update={"audit_checkpoint_dir": not_a_directory})
    chain = chain_for(broken, engine)
    refused: list[tuple[str, str]] = []
    chain.on_refused = lambda workspace, reason: refused.append((workspace, reason))
    await write_rows(engine, "alpha", 2)
    await write_rows(engine, "beta", 2)
    assert await chain.seal_all() == 4  # both workspaces sealed
    assert {workspace for workspace, _ in refused} == {"alpha", "beta"}
    assert all("audit checkpoint log" in reason for _, reason in refused), refused
    for report in await chain.verify():  # nothing was signed: the checkpoint is missing
        assert report.finding is not None and report.finding.breach is Breach.CHECKPOINT, report
    keyless = chain_for(broken.model_copy(update={"audit_signing_key_file": None}), engine)
    reports = await keyless.verify()  # an auditor without the key: the log itself is reported
    assert {r.workspace for r in reports} == {"alpha", "beta"}
    for report in reports:
        assert report.finding is not None and report.finding.breach is Breach.EXTERNAL, report
        assert "cannot read the audit checkpoint log" in report.finding.detail
