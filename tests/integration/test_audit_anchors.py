"""Anchors no one can move, and a head no one can recompute: what an insider with SQL rights does
to the audit chain, and what `verify` (and sealing) make of it.

- Moving the anchor and deleting the rows below it is named (`anchor_moved`) unless a sealed purge
  row vouches for the move; a retention cut writes and seals that row in its own transaction.
- With a signing key, each seal and each cut signs the head; a recomputed chain, a forged purge
  row or a deleted checkpoint is named; `--expect SEQ:HASH` checks a head recorded elsewhere.
- A back-dated `INSERT` is never sealed into the chain, and `verify` names it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.app.cli import run
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.audit.audit_chain import GENESIS, Breach, audit_row_hash
from sursis.domain.clock import utcnow
from sursis.domain.records import AuditEntry, AuditQuery, Principal
from sursis.domain.retention.audit_verify import AuditChainService
from sursis.domain.retention.retention import RetentionPolicy, RetentionService
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.encryption.signing import Ed25519Signer, write_signing_key
from tests.conftest import make_settings
from tests.integration.test_audit_chain import sql, write_rows


async def command(argv: list[str], settings: Settings) -> int:
    """`sursis ARGV` as the command line runs it (its own event loop, here in a thread)."""
    return await asyncio.to_thread(run, argv, settings)


ADMIN = Principal(id="test-admin", role=Role.ADMIN, workspace=None, name="test")


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def signer(tmp_path: Path) -> Ed25519Signer:
    path = tmp_path / "audit-signing.pem"
    write_signing_key(path)
    return Ed25519Signer.from_file(path)


def chain_of(engine: AsyncEngine, signer: Ed25519Signer | None = None) -> AuditChainService:
    return AuditChainService(SqlUnitOfWorkFactory(engine), utcnow, batch=4, signer=signer)


async def link(engine: AsyncEngine, workspace: str, seq: int) -> tuple[int, str]:
    async with engine.connect() as conn:
        query = "SELECT seq, hash FROM audit_log WHERE workspace = :w AND seq = :s"
        row = (await conn.execute(sa.text(query), {"w": workspace, "s": seq})).one()
    return int(row.seq), str(row.hash)


async def move_anchor(engine: AsyncEngine, workspace: str, seq: int) -> None:
    """The insider of the report: point the anchor at row `seq`, then delete every row up to it
    (the guard trigger allows deleting at or below the recorded anchor)."""
    _, digest = await link(engine, workspace, seq)
    async with engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE audit_chain_heads SET anchor_seq = :s, anchor_hash = :h WHERE workspace = :w"),
            {"s": seq, "h": digest, "w": workspace},
        )
        await conn.execute(
            sa.text("DELETE FROM audit_log WHERE workspace = :w AND seq <= :s"), {"w": workspace, "s": seq}
        )


async def forge_purge_row(engine: AsyncEngine, workspace: str, through: tuple[int, str]) -> None:
    """A purge row written by direct SQL (plaintext details, as a process without the key would)."""
    details = {"from_seq": 0, "from_hash": GENESIS, "through_seq": through[0], "anchor_hash": through[1]}
    async with engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO audit_log (at, actor, action, workspace, details) "
                "VALUES (:at, 'system:retention', 'retention.audit_purged', :w, :d)"
            ),
            {"at": utcnow(), "w": workspace, "d": json.dumps(details)},
        )


async def test_moving_the_anchor_without_a_purge_row_is_named(engine: AsyncEngine) -> None:
    chain = chain_of(engine)
    await write_rows(engine, "alpha", 8)
    await chain.seal_all()
    [before] = await chain.verify("alpha")
    assert before.ok and before.checked == 8
    await move_anchor(engine, "alpha", 5)
    [report] = await chain.verify("alpha")
    assert report.finding is not None, report
    assert report.finding.breach is Breach.ANCHOR and report.finding.seq == 5
    assert "without a purge" in report.finding.detail


async def test_a_retention_cut_vouches_for_its_anchor_and_chains_from_the_one_before(
    engine: AsyncEngine, signer: Ed25519Signer
) -> None:
    uow = SqlUnitOfWorkFactory(engine)
    chain = chain_of(engine, signer)
    retention = RetentionService(uow, utcnow, chain=chain, audit_batch=4)
    await write_rows(engine, "alpha", 6)
    await chain.seal_all()
    await retention.set_policy(ADMIN, RetentionPolicy("alpha", 1, 1))
    later = [utcnow() + timedelta(days=2)]
    retention.clock = lambda: later[0]
    chain.clock = lambda: later[0]
    [first] = await retention.run(ADMIN, "alpha")
    assert first.audit_rows > 0
    [report] = await chain.verify("alpha")
    assert report.ok, report.finding
    async with uow.reader() as reader:
        entries = await reader.audit.search(
            "alpha", AuditQuery(actions=("retention.audit_purged",), limit=10)
        )
        head = await reader.audit_chain.head("alpha")
    last = entries[-1].details
    assert (last["through_seq"], last["anchor_hash"]) == (head.anchor_seq, head.anchor_hash)
    assert "from_seq" in last and "from_hash" in last
    # a second cut starts where the first one ended
    later[0] += timedelta(days=2)
    await retention.run(ADMIN, "alpha")
    [again] = await chain.verify("alpha")
    assert again.ok, again.finding


async def test_a_forged_purge_row_fools_the_walk_but_not_the_signed_checkpoint(
    engine: AsyncEngine, signer: Ed25519Signer
) -> None:
    chain = chain_of(engine, signer)
    await write_rows(engine, "alpha", 8)
    await chain.seal_all()
    [signed] = await chain.verify("alpha")
    assert signed.ok, signed.finding
    through = await link(engine, "alpha", 5)
    await move_anchor(engine, "alpha", 5)
    await forge_purge_row(engine, "alpha", through)
    refused: list[tuple[str, str]] = []
    chain.on_refused = lambda workspace, reason: refused.append((workspace, reason))
    await chain.seal_all()  # the forged row is sealed, but the moved anchor is not signed
    assert refused and "anchor moved" in refused[0][1]
    unsigned = chain_of(engine)
    [walked] = await unsigned.verify("alpha")
    assert walked.ok  # without a checkpoint, a purge row written by hand passes the walk
    [report] = await chain.verify("alpha")
    assert report.finding is not None and report.finding.breach is Breach.ANCHOR, report


async def recompute_from(engine: AsyncEngine, workspace: str, seq: int, details: dict[str, object]) -> None:
    """The insider who owns the table: edit row `seq`, recompute every hash after it, move the head."""
    uow = SqlUnitOfWorkFactory(engine)
    async with uow.reader() as reader:
        links = await reader.audit_chain.links(workspace, 0, 1000)
    prev = GENESIS
    for found in links:
        entry = found.entry
        if found.seq == seq:
            entry = AuditEntry(
                entry.action, entry.actor, entry.workspace, details=details, id=entry.id, at=entry.at
            )
            await sql(
                engine, "UPDATE audit_log SET details = :d WHERE id = :i", d=json.dumps(details), i=entry.id
            )
        digest = audit_row_hash(prev, entry)
        await sql(
            engine,
            "UPDATE audit_log SET prev_hash = :p, hash = :h WHERE id = :i",
            p=prev,
            h=digest,
            i=entry.id,
        )
        prev = digest
    await sql(engine, "UPDATE audit_chain_heads SET hash = :h WHERE workspace = :w", h=prev, w=workspace)


async def test_a_recomputed_chain_is_caught_by_an_expected_head_and_by_the_checkpoint(
    database_url: str,
    engine: AsyncEngine,
    signer: Ed25519Signer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    chain = chain_of(engine, signer)
    await write_rows(engine, "alpha", 6)
    await chain.seal_all()
    recorded = await link(engine, "alpha", 6)
    await recompute_from(engine, "alpha", 3, {"n": 2, "note": "rewritten"})
    [walked] = await chain_of(engine).verify("alpha")
    assert walked.ok  # the links are consistent again: only something kept outside can tell
    [expected] = await chain_of(engine).verify("alpha", expect=recorded)
    assert expected.finding is not None and expected.finding.breach is Breach.EXPECTED, expected
    [checked] = await chain.verify("alpha")
    assert checked.finding is not None and checked.finding.breach is Breach.CHECKPOINT, checked

    settings = make_settings(database_url)
    expect = f"{recorded[0]}:{recorded[1]}"
    assert await command(["audit", "verify", "--workspace", "alpha", "--expect", expect], settings) == 1
    out = capsys.readouterr().out
    assert "BROKEN" in out and "expected_head at seq 6" in out


async def test_expect_is_ok_on_an_untouched_chain_and_refused_without_a_workspace(
    database_url: str, engine: AsyncEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    await write_rows(engine, "alpha", 3)
    await chain_of(engine).seal_all()
    seq, digest = await link(engine, "alpha", 3)
    settings = make_settings(database_url)
    argv = ["audit", "verify", "--workspace", "alpha", "--expect", f"{seq}:{digest}"]
    assert await command(argv, settings) == 0
    assert "ok  workspace alpha" in capsys.readouterr().out
    assert await command(["audit", "verify", "--expect", f"{seq}:{digest}"], settings) == 2
    assert "--workspace" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        run(["audit", "verify", "--workspace", "alpha", "--expect", "3:not-a-hash"], settings)
    assert exited.value.code == 2


async def test_deleting_the_checkpoint_is_named_and_the_sealer_will_not_sign_again_by_itself(
    engine: AsyncEngine, signer: Ed25519Signer
) -> None:
    chain = chain_of(engine, signer)
    await write_rows(engine, "alpha", 4)
    await chain.seal_all()
    async with engine.begin() as conn:
        await conn.execute(sa.text("DELETE FROM audit_checkpoints"))
    await write_rows(engine, "alpha", 2)
    refused: list[str] = []
    chain.on_refused = lambda _, reason: refused.append(reason)
    await chain.seal_all()
    assert refused and "no signed checkpoint" in refused[0]
    [report] = await chain.verify("alpha")
    assert report.finding is not None and report.finding.breach is Breach.CHECKPOINT, report
    [signed] = await chain.checkpoint("alpha")  # the operator's `sursis audit checkpoint`
    assert signed.ok
    [report] = await chain.verify("alpha")
    assert report.ok, report.finding


async def test_a_checkpoint_signed_by_another_key_is_refused(
    engine: AsyncEngine, signer: Ed25519Signer, tmp_path: Path
) -> None:
    await write_rows(engine, "alpha", 3)
    await chain_of(engine, signer).seal_all()
    other_path = tmp_path / "other.pem"
    write_signing_key(other_path)
    [report] = await chain_of(engine, Ed25519Signer.from_file(other_path)).verify("alpha")
    assert report.finding is not None and report.finding.breach is Breach.CHECKPOINT


async def test_a_back_dated_insert_is_never_sealed_and_verify_names_it(engine: AsyncEngine) -> None:
    chain = chain_of(engine)
    await write_rows(engine, "alpha", 3)
    await chain.seal_all()
    async with engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO audit_log (at, actor, action, workspace, details) "
                "VALUES (:at, 'operator:bob', 'pending.approved', 'alpha', '{}')"
            ),
            {"at": utcnow() - timedelta(days=30)},
        )
    await write_rows(engine, "alpha", 1)
    assert await chain.seal_all() == 1  # the newer row only
    [report] = await chain.verify("alpha")
    assert report.head_seq == 4 and report.unsealed == 1
    assert report.finding is not None and report.finding.breach is Breach.BACKDATED, report
