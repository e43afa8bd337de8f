"""A rule moves only along its life (candidate → pending enshrinement → enshrined → superseded, or
rejected): a move the life does not allow is refused before anything is written, on both databases."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from sursis.domain.clock import utcnow
from sursis.domain.errors import InvalidTransition
from sursis.domain.worlds.rules import Rule, RuleState, World
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.worlds.repository import SqlWorldRepository


@pytest.fixture
async def uow(database_url: str) -> AsyncIterator[SqlUnitOfWorkFactory]:
    engine = create_engine(database_url)
    yield SqlUnitOfWorkFactory(engine)
    await engine.dispose()


async def a_rule(uow: SqlUnitOfWorkFactory, state: RuleState) -> Rule:
    now = utcnow()
    world = World(uuid.uuid4(), "default", f"d-{uuid.uuid4().hex[:8]}", "t", "test", now)
    rule = Rule(uuid.uuid4(), 1, world.id, state, "Refund a damaged parcel", now, now)
    async with uow() as u:
        repo = SqlWorldRepository(u.session)
        await repo.add_world(world)
        await repo.add_rule(rule)
        await u.commit()
    return rule


async def state_of(uow: SqlUnitOfWorkFactory, rule: Rule) -> RuleState:
    async with uow() as u:
        [stored] = [
            r for r in await SqlWorldRepository(u.session).list_rules(rule.world_id) if r.id == rule.id
        ]
    return stored.state


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (RuleState.CANDIDATE, RuleState.ENSHRINED),  # past the people who must approve it
        (RuleState.REJECTED, RuleState.CANDIDATE),
        (RuleState.SUPERSEDED, RuleState.ENSHRINED),
        (RuleState.ENSHRINED, RuleState.CANDIDATE),
    ],
)
async def test_a_move_the_life_does_not_allow_is_refused_and_writes_nothing(
    uow: SqlUnitOfWorkFactory, current: RuleState, target: RuleState
) -> None:
    rule = await a_rule(uow, current)
    async with uow() as u:
        with pytest.raises(InvalidTransition, match=f"cannot become '{target.value}'"):
            await SqlWorldRepository(u.session).transition(rule.id, rule.version, current, target, utcnow())
        await u.commit()
    assert await state_of(uow, rule) is current


async def test_a_move_along_the_life_is_written(uow: SqlUnitOfWorkFactory) -> None:
    rule = await a_rule(uow, RuleState.CANDIDATE)
    async with uow() as u:
        repo = SqlWorldRepository(u.session)
        assert await repo.transition(
            rule.id, rule.version, RuleState.CANDIDATE, RuleState.ENSHRINED_PENDING, utcnow()
        )
        await u.commit()
    assert await state_of(uow, rule) is RuleState.ENSHRINED_PENDING
