"""A statement executed on the driver (`driver_statements`) behaves as SQLAlchemy's execution of it:
in the unit of work's transaction, whichever of the two sends the first statement, with SQLAlchemy's
errors, and a lost connection invalidated."""

from __future__ import annotations

import functools

import pytest
import sqlalchemy as sa

from sursis import AgentDefinition, Category, DeclaredTool, Service, ToolSpec
from sursis.infra.db import driver_statements, event_repositories
from sursis.infra.db.driver_statements import fetch_rows
from sursis.infra.db.engine import create_engine
from sursis.infra.db.repositories import base
from sursis.infra.db.unit_connection import UnitConnection
from sursis.testing import ScriptedModel, resolve_and_settle, settle

XID = sa.text("SELECT txid_current() AS xid, pg_backend_pid() AS pid")
DIVIDED = sa.text("SELECT 1 / CAST(:zero AS integer)")


async def test_a_driver_statement_runs_in_the_sessions_transaction(pg_migrated: str) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    sessions = functools.partial(UnitConnection, engine)
    try:
        async with sessions() as session:  # the driver's first: it sends the BEGIN
            [first] = await fetch_rows(session, XID, {})
            assert first._mapping == {"xid": first[0], "pid": first[1]}
            again = (await session.execute(XID)).one()
            assert (again.xid, again.pid) == (first[0], first[1])
            await session.rollback()
        async with sessions() as session:  # SQLAlchemy's first
            before = (await session.execute(XID)).one()
            [after] = await fetch_rows(session, XID, {})
            assert (after[0], after[1]) == (before.xid, before.pid)
            assert after[0] != first[0]
    finally:
        await engine.dispose()


async def test_a_driver_statement_raises_sqlalchemys_errors(pg_migrated: str) -> None:
    engine = create_engine(pg_migrated, pool_size=1)
    admin = create_engine(pg_migrated)
    sessions = functools.partial(UnitConnection, engine)
    try:
        async with sessions() as session:
            with pytest.raises(sa.exc.DBAPIError) as by_sqlalchemy:
                await session.execute(DIVIDED, {"zero": 0})
        async with sessions() as session:
            with pytest.raises(sa.exc.DBAPIError) as by_driver:
                await fetch_rows(session, DIVIDED, {"zero": 0})
        assert type(by_driver.value) is type(by_sqlalchemy.value)
        assert type(by_driver.value.orig) is type(by_sqlalchemy.value.orig)
        assert str(by_driver.value.orig) == str(by_sqlalchemy.value.orig) == "division by zero"
        async with sessions() as session:
            [row] = await fetch_rows(session, XID, {})
            async with admin.connect() as conn:
                await conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": row[1]})
            with pytest.raises(sa.exc.DBAPIError) as lost:
                await fetch_rows(session, XID, {})
            assert lost.value.connection_invalidated
        async with sessions() as session:  # the pool gives a new connection
            [row] = await fetch_rows(session, XID, {})
            assert row[0] > 0
    finally:
        await admin.dispose()
        await engine.dispose()


def test_the_installed_sqlalchemy_has_what_the_driver_path_uses() -> None:
    assert driver_statements.AVAILABLE


async def write(target: str) -> dict[str, str]:
    """Write something."""
    return {"written": target}


@pytest.mark.parametrize("on_driver", [True, False], ids=["driver", "sqlalchemy"])
async def test_an_approval_turn_is_the_same_with_and_without_the_driver_path(
    pg_migrated: str, on_driver: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the installed SQLAlchemy lacks what the driver path uses, every statement goes through
    SQLAlchemy's execution, and a turn is the same."""
    monkeypatch.setattr(base, "AVAILABLE", on_driver)
    monkeypatch.setattr(event_repositories, "AVAILABLE", on_driver)
    tool = DeclaredTool.declare(write, ToolSpec("write", category=Category.MUTATE, effect="Write {target}"))
    agents = [AgentDefinition("writer", "Write what you are told.", (tool,))]
    model = ScriptedModel().calls(("write", {"target": "b"})).text("done")
    async with Service.open(pg_migrated, agents=agents, model=model.model) as svc:
        conversation = await svc.start_conversation("writer", workspace="team")
        run = await svc.send(conversation.id, "write b")
        view = await settle(svc, run.id)
        [call] = view.pending
        assert (view.run.status, call.args) == ("suspended", {"target": "b"})
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "done")
