"""The audit chain: rows edited, deleted or reordered by direct SQL (as anyone with database access
could) are named by `verify`; parallel writers and sealers leave a chain that verifies; the
service's own grants still refuse changes outside sealing and retention cuts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.domain.audit.audit_chain import GENESIS, PURGE_ACTION, Breach
from sursis.domain.clock import utcnow
from sursis.domain.records import AuditEntry
from sursis.domain.retention.audit_verify import AuditChainService
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def chain(engine: AsyncEngine) -> AuditChainService:
    return AuditChainService(SqlUnitOfWorkFactory(engine), utcnow, batch=4)


async def write_rows(engine: AsyncEngine, workspace: str, count: int, *, per_commit: int = 1) -> None:
    uow_factory = SqlUnitOfWorkFactory(engine)
    for start in range(0, count, per_commit):
        async with uow_factory() as uow:
            for n in range(start, min(count, start + per_commit)):
                entry = AuditEntry("test.step", "system:test", workspace, details={"n": n, "note": "é"})
                await uow.audit.append(entry, utcnow())
            await uow.commit()


@contextlib.asynccontextmanager
async def tampering(engine: AsyncEngine) -> AsyncIterator[None]:
    """Lift the append-only guard, as an owner of the database could."""
    postgres = engine.dialect.name == "postgresql"
    async with engine.begin() as conn:
        if postgres:
            await conn.execute(sa.text("ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only"))
        else:
            await conn.execute(sa.text("DROP TRIGGER IF EXISTS audit_log_no_update"))
            await conn.execute(sa.text("DROP TRIGGER IF EXISTS audit_log_no_delete"))
    try:
        yield
    finally:
        if postgres:
            async with engine.begin() as conn:
                await conn.execute(sa.text("ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only"))


async def sql(engine: AsyncEngine, statement: str, **params: object) -> None:
    async with tampering(engine), engine.begin() as conn:
        await conn.execute(sa.text(statement), params)


async def row_id(engine: AsyncEngine, workspace: str, seq: int) -> int:
    async with engine.connect() as conn:
        query = "SELECT id FROM audit_log WHERE workspace = :w AND seq = :s"
        return int((await conn.execute(sa.text(query), {"w": workspace, "s": seq})).scalar_one())


async def test_an_untouched_chain_verifies_and_sealing_is_in_bounded_batches(
    engine: AsyncEngine, chain: AuditChainService
) -> None:
    await write_rows(engine, "alpha", 10, per_commit=3)
    await write_rows(engine, "beta", 3)
    assert await chain.seal() == 4 + 3  # one batch (4) per workspace
    assert await chain.seal_all() == 6
    reports = {r.workspace: r for r in await chain.verify()}
    assert reports["alpha"].ok and reports["alpha"].checked == 10 and reports["alpha"].unsealed == 0
    assert reports["beta"].ok and reports["beta"].checked == 3
    await write_rows(engine, "alpha", 2)  # new rows wait for the next seal, and are counted
    [alpha] = await chain.verify("alpha")
    assert alpha.ok and alpha.checked == 10 and alpha.unsealed == 2


async def test_a_batch_is_sealed_by_one_update_on_postgresql(
    engine: AsyncEngine, chain: AuditChainService
) -> None:
    """PostgreSQL writes a batch's links in one statement (one executor start, not one a row);
    SQLite executes the row's update once a row. Either way the chain verifies and a sealed row
    is never sealed again."""
    await write_rows(engine, "alpha", 4)
    updates: list[int] = []

    def seen(
        _conn: object, _cursor: object, statement: str, params: object, _context: object, many: bool
    ) -> None:
        if statement.lstrip().upper().startswith("UPDATE AUDIT_LOG"):
            updates.append(len(params) if many and isinstance(params, list | tuple) else 1)

    sa.event.listen(engine.sync_engine, "before_cursor_execute", seen)
    try:
        assert await chain.seal() == 4
    finally:
        sa.event.remove(engine.sync_engine, "before_cursor_execute", seen)
    assert updates == ([1] if engine.dialect.name == "postgresql" else [4])
    [alpha] = await chain.verify("alpha")
    assert alpha.ok and alpha.checked == 4 and alpha.unsealed == 0
    assert await chain.seal() == 0


@pytest.mark.parametrize(
    ("statement", "breach", "seq"),
    [
        (
            "UPDATE audit_log SET actor = 'operator:mallory' WHERE workspace = 'alpha' AND seq = 5",
            Breach.EDITED,
            5,
        ),
        ("UPDATE audit_log SET details = :d WHERE workspace = 'alpha' AND seq = 3", Breach.EDITED, 3),
        ("UPDATE audit_log SET hash = :h WHERE workspace = 'alpha' AND seq = 7", Breach.EDITED, 7),
        ("DELETE FROM audit_log WHERE workspace = 'alpha' AND seq = 4", Breach.DELETED, 4),
        ("DELETE FROM audit_log WHERE workspace = 'alpha' AND seq >= 9", Breach.DELETED, 9),
        (
            "UPDATE audit_log SET seq = CASE seq WHEN 6 THEN 1006 WHEN 7 THEN 6 END "
            "WHERE workspace = 'alpha' AND seq IN (6, 7)",
            Breach.REORDERED,
            6,
        ),
    ],
    ids=["actor", "details", "hash", "deleted", "tail", "reordered"],
)
async def test_verify_names_the_first_row_edited_deleted_or_reordered(
    engine: AsyncEngine, chain: AuditChainService, statement: str, breach: Breach, seq: int
) -> None:
    await write_rows(engine, "alpha", 10, per_commit=2)
    await write_rows(engine, "beta", 2)
    await chain.seal_all()
    tampered = await row_id(engine, "alpha", seq)
    params = {"d": '{"n": 99, "note": "\\u00e9"}', "h": "f" * 64}
    await sql(engine, statement, **{k: v for k, v in params.items() if f":{k}" in statement})
    if breach is Breach.REORDERED:  # the moved row takes the place of another: seq 7 becomes 6
        tampered = await row_id(engine, "alpha", 6)
        await sql(engine, "UPDATE audit_log SET seq = 7 WHERE workspace = 'alpha' AND seq = 1006")
    reports = {r.workspace: r for r in await chain.verify()}
    finding = reports["alpha"].finding
    assert finding is not None, statement
    assert (finding.breach, finding.seq) == (breach, seq)
    if breach is not Breach.DELETED:
        assert finding.row_id == tampered
    assert reports["beta"].ok  # one workspace's chain is independent of another's


async def test_the_service_may_seal_once_and_never_edit_or_delete_a_chained_row(
    engine: AsyncEngine, chain: AuditChainService
) -> None:
    await write_rows(engine, "alpha", 3)
    refused = [
        "UPDATE audit_log SET actor = 'operator:mallory'",  # unsealed: still only its link may be set
        "DELETE FROM audit_log",
    ]
    await chain.seal_all()
    refused += ["UPDATE audit_log SET hash = NULL, seq = NULL", "UPDATE audit_log SET action = 'x'"]
    for statement in refused:
        with pytest.raises(DBAPIError, match="append-only"):
            async with engine.begin() as conn:
                await conn.execute(sa.text(statement))
    [report] = await chain.verify("alpha")
    assert report.ok and report.checked == 3


async def test_parallel_writers_and_sealers_leave_a_chain_that_verifies(
    database_url: str, chain: AuditChainService
) -> None:
    """Several processes' worth of writers (each its own engine and pool) write one workspace's
    rows while several sealers run: every row is sealed exactly once, in one unambiguous order."""
    engines = [create_engine(database_url) for _ in range(4)]
    sealers = [AuditChainService(SqlUnitOfWorkFactory(e), utcnow, batch=7) for e in engines[:2]]
    stop = asyncio.Event()

    async def keep_sealing(service: AuditChainService) -> None:
        while not stop.is_set():
            with contextlib.suppress(DBAPIError):  # SQLite: a sealer may find the database busy
                await service.seal()
            await asyncio.sleep(0)

    try:
        sealing = [asyncio.create_task(keep_sealing(s)) for s in sealers]
        await asyncio.gather(*(write_rows(e, "alpha", 25, per_commit=n + 1) for n, e in enumerate(engines)))
        stop.set()
        await asyncio.gather(*sealing)
        await chain.seal_all()
        [report] = await chain.verify("alpha")
        assert report.ok, report.finding
        assert report.checked == report.head_seq == 100 and report.unsealed == 0
    finally:
        for e in engines:
            await e.dispose()


async def test_a_retention_cut_keeps_the_rest_of_the_chain_verifiable(
    engine: AsyncEngine, chain: AuditChainService
) -> None:
    await write_rows(engine, "alpha", 10)
    await chain.seal_all()
    uow_factory = SqlUnitOfWorkFactory(engine)
    async with uow_factory() as uow:
        [*_, through] = await uow.audit_chain.links("alpha", 0, 4)
        assert await uow.audit_chain.cut("alpha", through, utcnow() + timedelta(seconds=1)) == 4
        # the purge row retention writes with a cut: it vouches for the anchor it moved from and to
        vouch = {"from_seq": 0, "from_hash": GENESIS, "through_seq": through.seq, "anchor_hash": through.hash}
        await uow.audit.append(AuditEntry(PURGE_ACTION, "system:test", "alpha", details=vouch), utcnow())
        await uow.commit()
    await chain.seal_all()
    [report] = await chain.verify("alpha")
    assert report.ok and report.anchor_seq == 4 and report.checked == 7
    # below the anchor nothing is left to delete; above it the guard still refuses
    with pytest.raises(DBAPIError, match="append-only"):
        async with engine.begin() as conn:
            await conn.execute(sa.text("DELETE FROM audit_log WHERE seq = 5"))
    await sql(engine, "DELETE FROM audit_log WHERE workspace = 'alpha' AND seq = 5")
    [report] = await chain.verify("alpha")
    assert report.finding is not None and (report.finding.breach, report.finding.seq) == (Breach.DELETED, 5)
