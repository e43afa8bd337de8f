"""SQL for worlds, their rules (one row per version), decisions, flags and agent sessions."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.worlds.rules import (
    Citation,
    Decision,
    Flag,
    FlagKind,
    GateResult,
    Rule,
    RuleState,
    TestCase,
    World,
    WorldMode,
    check_transition,
)
from sursis.infra.db.repositories.base import dialect_insert, rowcount
from sursis.infra.db.unit_connection import UnitConnection
from sursis.infra.db.world_tables import world_decisions, world_flags, world_rules, world_sessions, worlds


def _world(row: Any) -> World:
    return World(
        id=row.id,
        workspace=row.workspace,
        domain=row.domain,
        title=row.title,
        created_by=row.created_by,
        created_at=row.created_at,
    )


def _rule(row: Any) -> Rule:
    gate = row.gate
    return Rule(
        id=row.id,
        version=row.version,
        world_id=row.world_id,
        state=RuleState(row.state),
        text=row.text,
        created_at=row.created_at,
        updated_at=row.updated_at,
        predicate=row.predicate,
        applies_when=row.applies_when,
        tests=[TestCase(**t) for t in row.tests],
        gate=None
        if gate is None
        else GateResult(
            passed=gate["passed"],
            cases=gate["cases"],
            code_hash=gate["code_hash"],
            ran_at=datetime.fromisoformat(gate["ran_at"]),
        ),
        citations=[Citation(**c) for c in row.citations],
        evidence=dict(row.evidence),
        reason=row.reason,
        request_conversation_id=row.request_conversation_id,
        request_tool_call_id=row.request_tool_call_id,
        enshrined_at=row.enshrined_at,
    )


def gate_json(gate: GateResult | None) -> dict[str, Any] | None:
    if gate is None:
        return None
    return {
        "passed": gate.passed,
        "cases": gate.cases,
        "code_hash": gate.code_hash,
        "ran_at": gate.ran_at.isoformat(),
    }


def _decision(row: Any) -> Decision:
    return Decision(
        id=row.id,
        world_id=row.world_id,
        rule_ids=list(row.rule_ids),
        context=dict(row.context),
        outcome=row.outcome,
        created_at=row.created_at,
    )


def _flag(row: Any) -> Flag:
    return Flag(
        id=row.id,
        world_id=row.world_id,
        decision_id=row.decision_id,
        kind=FlagKind(row.kind),
        reason=row.reason,
        created_at=row.created_at,
    )


class SqlWorldRepository:
    """Reads and writes of the worlds context inside one caller-owned transaction."""

    def __init__(self, session: UnitConnection) -> None:
        self._session = session

    async def add_world(self, world: World) -> bool:
        """False when the workspace already has a world for the domain, in any case (`REFUNDS`
        and `refunds` are one domain); the unique index decides, so a race has one winner."""
        postgres = self._session.get_bind().dialect.name == "postgresql"
        insert = dialect_insert(worlds, postgres=postgres).values(**asdict(world)).on_conflict_do_nothing()
        return rowcount(await self._session.execute(insert)) == 1

    async def get_world(self, world_id: uuid.UUID) -> World | None:
        row = (await self._session.execute(sa.select(worlds).where(worlds.c.id == world_id))).first()
        return _world(row) if row else None

    async def list_worlds(self, workspace: str | None) -> list[World]:
        query = sa.select(worlds).order_by(worlds.c.created_at, worlds.c.id)
        if workspace is not None:
            query = query.where(worlds.c.workspace == workspace)
        return [_world(r) for r in await self._session.execute(query)]

    # Rules ---------------------------------------------------------------------------------------

    async def add_rule(self, rule: Rule) -> None:
        await self._session.execute(world_rules.insert().values(**self._rule_values(rule)))

    @staticmethod
    def _rule_values(rule: Rule) -> dict[str, Any]:
        return {
            "id": rule.id,
            "version": rule.version,
            "world_id": rule.world_id,
            "state": rule.state.value,
            "text": rule.text,
            "predicate": rule.predicate,
            "applies_when": rule.applies_when,
            "tests": [asdict(t) for t in rule.tests],
            "gate": gate_json(rule.gate),
            "citations": [asdict(c) for c in rule.citations],
            "evidence": rule.evidence,
            "reason": rule.reason,
            "request_conversation_id": rule.request_conversation_id,
            "request_tool_call_id": rule.request_tool_call_id,
            "created_at": rule.created_at,
            "updated_at": rule.updated_at,
            "enshrined_at": rule.enshrined_at,
        }

    async def latest_rule(self, world_id: uuid.UUID, rule_id: uuid.UUID) -> Rule | None:
        row = (
            await self._session.execute(
                sa.select(world_rules)
                .where(world_rules.c.world_id == world_id, world_rules.c.id == rule_id)
                .order_by(world_rules.c.version.desc())
                .limit(1)
            )
        ).first()
        return _rule(row) if row else None

    async def rule_in_force(self, world_id: uuid.UUID, rule_id: uuid.UUID) -> Rule | None:
        """The enshrined version of a rule (a newer draft or a denied request does not replace
        it); None when no version of the rule is in force."""
        row = (
            await self._session.execute(
                sa.select(world_rules)
                .where(
                    world_rules.c.world_id == world_id,
                    world_rules.c.id == rule_id,
                    world_rules.c.state == RuleState.ENSHRINED.value,
                )
                .order_by(world_rules.c.version.desc())
                .limit(1)
            )
        ).first()
        return _rule(row) if row else None

    async def rule_versions(self, world_id: uuid.UUID, rule_id: uuid.UUID) -> list[Rule]:
        rows = await self._session.execute(
            sa.select(world_rules)
            .where(world_rules.c.world_id == world_id, world_rules.c.id == rule_id)
            .order_by(world_rules.c.version)
        )
        return [_rule(r) for r in rows]

    async def list_rules(self, world_id: uuid.UUID, state: RuleState | None = None) -> list[Rule]:
        query = sa.select(world_rules).where(world_rules.c.world_id == world_id)
        if state is not None:
            query = query.where(world_rules.c.state == state.value)
        rows = await self._session.execute(
            query.order_by(world_rules.c.created_at, world_rules.c.id, world_rules.c.version)
        )
        return [_rule(r) for r in rows]

    async def update_draft(self, rule: Rule, now: datetime) -> bool:
        """Write a candidate's draft fields; False when the row is no longer a candidate."""
        values = self._rule_values(rule)
        for fixed in ("id", "version", "world_id", "state", "created_at", "enshrined_at"):
            values.pop(fixed)
        values["updated_at"] = now
        result = await self._session.execute(
            world_rules.update()
            .where(
                world_rules.c.id == rule.id,
                world_rules.c.version == rule.version,
                world_rules.c.state == RuleState.CANDIDATE.value,
            )
            .values(**values)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def transition(
        self,
        rule_id: uuid.UUID,
        version: int,
        current: RuleState,
        target: RuleState,
        now: datetime,
        **values: Any,
    ) -> bool:
        """One conditional write: the row moves only if it is still in `current`. A move the rules'
        life does not allow (`check_transition`) raises `InvalidTransition` before anything is written."""
        check_transition(current, target)
        result = await self._session.execute(
            world_rules.update()
            .where(
                world_rules.c.id == rule_id,
                world_rules.c.version == version,
                world_rules.c.state == current.value,
            )
            .values(state=target.value, updated_at=now, **values)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def enshrined_texts(self, world_id: uuid.UUID) -> list[str]:
        rows = await self._session.execute(
            sa.select(world_rules.c.text).where(
                world_rules.c.world_id == world_id, world_rules.c.state == RuleState.ENSHRINED.value
            )
        )
        return [r[0] for r in rows]

    async def pending_requests(self, world_id: uuid.UUID) -> list[Rule]:
        return await self.list_rules(world_id, RuleState.ENSHRINED_PENDING)

    # Decisions and flags -------------------------------------------------------------------------

    async def get_decision(self, world_id: uuid.UUID, decision_id: str) -> Decision | None:
        row = (
            await self._session.execute(
                sa.select(world_decisions).where(
                    world_decisions.c.world_id == world_id, world_decisions.c.id == decision_id
                )
            )
        ).first()
        return _decision(row) if row else None

    async def add_decision(self, decision: Decision) -> None:
        await self._session.execute(world_decisions.insert().values(**asdict(decision)))

    async def get_flag(self, world_id: uuid.UUID, flag_id: str) -> Flag | None:
        row = (
            await self._session.execute(
                sa.select(world_flags).where(world_flags.c.world_id == world_id, world_flags.c.id == flag_id)
            )
        ).first()
        return _flag(row) if row else None

    async def add_flag(self, flag: Flag) -> None:
        values = asdict(flag)
        values["kind"] = flag.kind.value
        await self._session.execute(world_flags.insert().values(**values))

    async def flagged_decisions(self, world_id: uuid.UUID, limit: int = 5000) -> list[tuple[Flag, Decision]]:
        d, f = world_decisions.c, world_flags.c
        rows = await self._session.execute(
            sa.select(
                world_flags,
                world_decisions.c.rule_ids,
                d.context,
                d.outcome,
                d.created_at.label("decided_at"),
            )
            .join(world_decisions, sa.and_(d.world_id == f.world_id, d.id == f.decision_id))
            .where(f.world_id == world_id)
            .order_by(f.created_at.desc())
            .limit(limit)
        )
        return [
            (
                _flag(r),
                Decision(
                    id=r.decision_id,
                    world_id=r.world_id,
                    rule_ids=list(r.rule_ids),
                    context=dict(r.context),
                    outcome=r.outcome,
                    created_at=r.decided_at,
                ),
            )
            for r in rows
        ]

    # Sessions ------------------------------------------------------------------------------------

    async def add_session(
        self, conversation_id: uuid.UUID, world_id: uuid.UUID, mode: WorldMode, created_by: str, now: datetime
    ) -> None:
        await self._session.execute(
            world_sessions.insert().values(
                conversation_id=conversation_id,
                world_id=world_id,
                mode=mode.value,
                created_by=created_by,
                created_at=now,
            )
        )

    async def session(self, conversation_id: uuid.UUID) -> tuple[uuid.UUID, WorldMode] | None:
        row = (
            await self._session.execute(
                sa.select(world_sessions.c.world_id, world_sessions.c.mode).where(
                    world_sessions.c.conversation_id == conversation_id
                )
            )
        ).first()
        return (row.world_id, WorldMode(row.mode)) if row else None
