"""The memory gateway on real databases: rule content is refused (on PostgreSQL by the database too)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from sursis.domain.clock import utcnow
from sursis.domain.worlds.memory import MemoryKind, MemoryRefused, MemoryTier, similarity
from sursis.domain.worlds.rules import Rule, RuleState, World
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.worlds.memory import MemoryGateway, MemoryScope
from sursis.infra.worlds.repository import SqlWorldRepository
from tests.conftest import _truncate_pg

RULE = "Refund a damaged parcel reported within 14 days of delivery"
RESTATED = "refund damaged parcels reported within 14 days of the delivery"


@pytest.fixture
async def uow(database_url: str) -> AsyncIterator[SqlUnitOfWorkFactory]:
    engine = create_engine(database_url)
    yield SqlUnitOfWorkFactory(engine)
    await engine.dispose()


@pytest.fixture
async def pg_uow(pg_migrated: str) -> AsyncIterator[SqlUnitOfWorkFactory]:
    """PostgreSQL only: the trigger and pg_trgm are its own."""
    await _truncate_pg(pg_migrated)
    engine = create_engine(pg_migrated)
    yield SqlUnitOfWorkFactory(engine)
    await engine.dispose()


async def world_with_rule(uow: SqlUnitOfWorkFactory, state: RuleState = RuleState.ENSHRINED) -> uuid.UUID:
    now = utcnow()
    world = World(uuid.uuid4(), "default", f"d-{uuid.uuid4().hex[:8]}", "t", "test", now)
    async with uow() as u:
        repo = SqlWorldRepository(u.session)
        await repo.add_world(world)
        await repo.add_rule(Rule(uuid.uuid4(), 1, world.id, state, RULE, now, now))
        await u.commit()
    return world.id


def scope(world_id: uuid.UUID | None, agent: str = "world") -> MemoryScope:
    return MemoryScope("default", agent, world_id, uuid.uuid4(), uuid.uuid4())


async def test_a_memory_that_restates_an_enshrined_rule_is_refused(uow: SqlUnitOfWorkFactory) -> None:
    world_id = await world_with_rule(uow)
    gateway = MemoryGateway(uow, utcnow)
    with pytest.raises(MemoryRefused) as refused:
        await gateway.remember(scope(world_id), RESTATED, MemoryTier.PERSISTENT, MemoryKind.OBSERVATION, [])
    assert refused.value.code == "MEMORY_RULE_CONTENT"
    kept = await gateway.remember(
        scope(world_id),
        "the operator asked twice about damaged parcels",
        MemoryTier.PERSISTENT,
        MemoryKind.PREFERENCE,
        [],
    )
    assert kept["tier"] == "persistent"


async def test_a_candidate_s_text_may_be_remembered(uow: SqlUnitOfWorkFactory) -> None:
    world_id = await world_with_rule(uow, RuleState.CANDIDATE)
    gateway = MemoryGateway(uow, utcnow)
    await gateway.remember(scope(world_id), RESTATED, MemoryTier.SESSION, MemoryKind.EXPLORATION, [])


async def test_recall_finds_the_scope_s_memories(uow: SqlUnitOfWorkFactory) -> None:
    world_id = await world_with_rule(uow)
    gateway = MemoryGateway(uow, utcnow)
    mine = scope(world_id)
    await gateway.remember(
        mine, "predicates over delivery dates need a default", MemoryTier.PERSISTENT, MemoryKind.PATTERN, []
    )
    await gateway.remember(
        mine, "the operator prefers short citations", MemoryTier.SESSION, MemoryKind.PREFERENCE, []
    )
    other_session = MemoryScope("default", "world", world_id, uuid.uuid4(), uuid.uuid4())
    found = await gateway.recall(other_session, "delivery dates default")
    assert [m["text"] for m in found] == ["predicates over delivery dates need a default"]
    assert await gateway.recall(other_session, "short citations") == [], "session memory stays in its session"
    assert [m["kind"] for m in await gateway.recall(mine, "short citations")] == ["preference"]
    assert await gateway.recall(scope(None, "ops"), "delivery dates default") == [], "keyed to the world"


async def test_postgres_refuses_rule_content_inserted_by_hand(pg_uow: SqlUnitOfWorkFactory) -> None:
    uow = pg_uow
    world_id = await world_with_rule(uow)
    insert = sa.text(
        "INSERT INTO memories (id, workspace, world_id, agent, tier, kind, text, created_at) "
        "VALUES (:id, 'default', :world_id, 'world', 'persistent', 'observation', :text, now())"
    )
    async with uow() as u:
        with pytest.raises(sa_exc.DBAPIError, match="restates an enshrined rule"):
            await u.session.execute(insert, {"id": uuid.uuid4(), "world_id": world_id, "text": RESTATED})
    async with uow() as u:
        await u.session.execute(
            insert, {"id": uuid.uuid4(), "world_id": world_id, "text": "a note about refunds"}
        )
        await u.commit()


async def test_python_and_pg_trgm_measure_alike(pg_uow: SqlUnitOfWorkFactory) -> None:
    pairs = [
        (RULE, RESTATED),
        ("cat", "cats"),
        ("Über-große Pakete", "uber grosse pakete"),
        ("a b c", "abc"),
        (RULE, "x"),
    ]
    async with pg_uow() as u:
        for a, b in pairs:
            pg = await u.session.scalar(sa.text("SELECT similarity(:a, :b)"), {"a": a, "b": b})
            assert similarity(a, b) == pytest.approx(float(pg), abs=1e-6), (a, b)
